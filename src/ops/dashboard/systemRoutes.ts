/**
 * The dashboard's system pages: workers, cron schedules, the outbox and the
 * audit log, with the cron and outbox actions. Outbox errors are redacted like
 * job errors, URL paths included (a webhook's token); an unknown schedule is
 * answered as a flash.
 */
import { redactUrlPaths } from "../../core/secrets.js";
import { isId } from "../../core/validate.js";
import { formParam, HttpError, nameSegment, param } from "./request.js";
import { actionRoute, pageRoute, type Route } from "./routes.js";
import { auditPage, cronPage, outboxPage, workersPage } from "./views.js";

/** The system pages and the cron and outbox actions. */
export const systemRoutes: Route[] = [
  pageRoute("/audit", async ({ statements }, { url, ctx, page }) => {
    const before = param(url, "before");
    if (before && !isId(before)) throw new HttpError(400, "before must be an audit row id");
    const rows = await statements.auditList({ before: before || null, limit: 100 });
    return page(200, auditPage(ctx, rows, before, 100));
  }),
  pageRoute("/outbox", async ({ statements, redactError }, { ctx, page }) => {
    const [summary, keys] = await Promise.all([statements.outboxSummary(), statements.outboxKeys({ limit: 200 })]);
    const shown = keys.map((k) => ({
      ...k,
      // URL paths too: errors stored before sinks described their URLs may hold a webhook's token.
      error: redactUrlPaths(redactError(k.error, { id: "outbox", queue: k.topic, kind: "outbox" }) ?? "") || null,
    }));
    return page(200, outboxPage({ ...ctx, refresh: 10 }, summary, shown));
  }),
  pageRoute("/cron", async ({ admin }, { ctx, page }) =>
    page(200, cronPage({ ...ctx, refresh: 30 }, await admin.cronSchedules(), ctx.canAct !== false)),
  ),
  pageRoute("/workers", async ({ liveTopics, workersInFlight }, { ctx, page }) =>
    page(200, workersPage({ ...ctx, refresh: 5, live: liveTopics("workers") }, await workersInFlight())),
  ),
  actionRoute(/^\/cron\/([^/]+)\/(pause|resume|run)$/, async ({ admin }, { done, record }, [segment, verbText]) => {
    const name = nameSegment(segment, "schedule");
    const verb = verbText as "pause" | "resume" | "run";
    const found =
      verb === "pause"
        ? await admin.pauseCron(name)
        : verb === "resume"
          ? await admin.resumeCron(name)
          : await admin.runCronNow(name);
    if (!found) return done(`There is no schedule ${name}.`, "err");
    await record(`cron ${verb}`, `schedule ${name}`);
    return done(
      verb === "pause"
        ? `Schedule ${name} is paused: its ticks are skipped until it is resumed.`
        : verb === "resume"
          ? `Schedule ${name} runs again from its next tick.`
          : `Schedule ${name} runs once at the next pass of a scheduler that declares it.`,
    );
  }),
  actionRoute("/outbox/retry", async ({ statements }, { form, done, record }) => {
    const topic = formParam(form, "topic");
    const key = form.get("key") ?? "";
    if (!topic || key.length === 0 || key.length > 512)
      throw new HttpError(400, "a topic and a key (1–512 characters) are needed");
    const events = await statements.outboxRetryKey({ key, topic });
    await record("outbox retry", `outbox ${topic}/${key}`.slice(0, 600), { events });
    return done(`${events} event(s) of key ${key} are due now.`);
  }),
];
