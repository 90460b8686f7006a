/**
 * The dashboard's queue routes: the overview, a queue's page (counts, charts,
 * limits, paused keys), the charts fragment, and the queue actions (limits,
 * key pauses, pause/resume, retry of dead jobs). Chart series come from the
 * runtime's shared cache; invalid limits are answered as a flash, not a 500.
 */
import { ValidationError } from "../../core/errors.js";
import { type Duration, NAME_PATTERN } from "../../core/validate.js";
import type { Admin } from "../admin.js";
import type { StatsPoint, StatsRange } from "../adminTypes.js";
import { formParam, HttpError, limitsOf, nameSegment, param, rangeOf } from "./request.js";
import { actionRoute, pageRoute, type Route } from "./routes.js";
import { chartsBlock, overviewPage, queuePage } from "./views.js";

/** The overview, queue and charts pages and the queue actions. */
export const queueRoutes: Route[] = [
  pageRoute("/", async (rt, { ctx, page }) => {
    const { admin, liveTopics, series, workersInFlight } = rt;
    const [queues, stats, health, workers] = await Promise.all([
      admin.overview(),
      series(undefined, "1h"),
      admin.health(rt.health).then(
        (r) => r,
        (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
      ),
      workersInFlight(),
    ]);
    return page(
      200,
      overviewPage(
        { ...ctx, refresh: 10, live: liveTopics("queues", "workers") },
        {
          queues,
          stats,
          warnings: health instanceof Error ? [] : health.warnings,
          healthError: health instanceof Error ? health.message : undefined,
          workers,
        },
      ),
    );
  }),
  pageRoute(/^\/queues\/([^/]+)$/, async ({ admin, liveTopics, series }, { url, ctx, page }, [segment]) => {
    const queue = nameSegment(segment, "queue");
    const range = rangeOf(url);
    const [overview, stats, limits, pausedKeys] = await Promise.all([
      admin.overview(),
      series(queue, range),
      admin.getQueueLimits(queue),
      admin.pausedKeys(queue),
    ]);
    return page(
      200,
      queuePage(
        { ...ctx, refresh: 30, live: liveTopics("queues") },
        {
          queue,
          overview: overview.find((q) => q.queue === queue),
          range,
          stats,
          limits: limits[0],
          pausedKeys,
          canAct: ctx.canAct !== false,
        },
      ),
    );
  }),
  pageRoute("/charts", async ({ series, send }, { res, url }) => {
    const queue = param(url, "queue");
    if (queue && !NAME_PATTERN.test(queue)) throw new HttpError(400, "not a queue name");
    const range = rangeOf(url);
    send(res, 200, chartsBlock(range, queue, await series(queue || undefined, range)));
  }),
  actionRoute(
    /^\/queues\/([^/]+)\/(limits|keys\/pause|keys\/resume)$/,
    async ({ admin }, { form, done, record }, [segment, verb]) => {
      const queue = nameSegment(segment, "queue");
      try {
        if (verb === "limits") {
          const limits = limitsOf(form);
          await admin.setQueueLimits(queue, limits);
          await record("queue limits", `queue ${queue}`, { limits });
          return done(`Limits of ${queue} saved.`);
        }
        const key = formParam(form, "key");
        if (verb === "keys/pause") {
          const until = await admin.pauseKey(queue, key || null, (formParam(form, "for") || "10m") as Duration);
          await record("key pause", `queue ${queue}`, { key: key || null, until: until.toISOString() });
          return done(`${key ? `Key ${key}` : "The whole queue"} of ${queue} is paused until ${until.toISOString()}.`);
        }
        const resumed = await admin.resumeKey(queue, key || null);
        await record("key resume", `queue ${queue}`, { key: key || null, resumed });
        return done(
          resumed ? `${key ? `Key ${key}` : "The queue-wide pause"} of ${queue} is resumed.` : "It was not paused.",
        );
      } catch (error) {
        if (error instanceof ValidationError) return done(error.message, "err");
        throw error;
      }
    },
  ),
  actionRoute(
    /^\/queues\/([^/]+)\/(pause|resume|retry-dead)$/,
    async ({ admin }, { done, record }, [segment, verb]) => {
      const queue = nameSegment(segment, "queue");
      await record(`queue ${verb}`, `queue ${queue}`);
      if (verb === "pause") {
        await admin.pauseQueue(queue);
        return done(`Queue ${queue} is paused: running jobs finish, nothing new is claimed.`);
      }
      if (verb === "resume") {
        await admin.resumeQueue(queue);
        return done(`Queue ${queue} is active again.`);
      }
      const n = await admin.retryDead(queue);
      return done(`${n} dead job(s) in ${queue} are pending again.`);
    },
  ),
];

/** Chart series, shared by every viewer for 15 s (a page's charts reload every 30 s). */
export function sharedSeries(admin: Admin): (queue: string | undefined, range: StatsRange) => Promise<StatsPoint[]> {
  const seriesCache = new Map<string, { at: number; points: Promise<StatsPoint[]> }>();
  const series = (queue: string | undefined, range: StatsRange): Promise<StatsPoint[]> => {
    const key = `${queue ?? ""}\u0000${range}`;
    const hit = seriesCache.get(key);
    if (hit && Date.now() - hit.at < 15_000) return hit.points;
    if (seriesCache.size > 1000) seriesCache.clear();
    const points = admin.queueSeries(queue, range);
    seriesCache.set(key, { at: Date.now(), points });
    points.catch(() => seriesCache.delete(key));
    return points;
  };
  return series;
}
