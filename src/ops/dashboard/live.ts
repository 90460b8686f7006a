/**
 * The dashboard's live feed: server-sent events at `<base>/events`, fed by one
 * hub per dashboard process, whatever the number of open tabs.
 *
 * The hub holds ONE listener connection on the schema's NOTIFY channel
 * (enqueues, cancels, limit changes arrive there) and reads ONE snapshot per
 * tick for every viewer together: the queue counts (the overview's indexed
 * statement), the live workers with their in-flight jobs when a workers page
 * is open, and the jobs that open pages watch (one `id = ANY` probe for all of
 * them). A notification runs a tick within 50 ms (coalesced, at most four a
 * second); finishing a job sends
 * no NOTIFY in skipq's schema (a NOTIFY per completion would serialise every
 * commit on the notification queue's lock), so while anyone watches, the hub
 * also ticks every `intervalMs`. Each tick's result is compared with the last
 * and only changes are sent. With nobody watching, the hub holds no connection
 * and runs nothing. The ticks and the heartbeat are Services
 * (src/shared/service.ts): ticks never overlap, and a failing snapshot backs
 * off and is logged throttled; its statements are LiveStore's (db/liveStore.ts).
 *
 * Invariants: a viewer costs the database nothing of its own (a new viewer is
 * sent the hub's cached snapshot); an event's data is JSON of values already
 * redacted the way pages redact them; a stream ends after `maxStreamMs`, so the
 * browser reconnects and is authenticated again (a revoked session stops
 * receiving within that time, and at once when signed out from this process).
 */
import type http from "node:http";
import type { Logger } from "../../core/logger.js";
import { Listener } from "../../db/listener.js";
import { LiveStore } from "../../db/liveStore.js";
import type { Store } from "../../db/store.js";
import { Service } from "../../shared/service.js";
import type { Admin } from "../admin.js";
import type { QueueOverview, WorkerPresence } from "../adminTypes.js";

/** What a page asks the feed for. */
export interface LiveInterest {
  queues: boolean;
  workers: boolean;
  jobs: string[];
}

/** A job as the feed sends it: what a page shows of it, its error already redacted. */
export interface LiveJob {
  id: string;
  queue: string;
  kind: string;
  status: string;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_at: string | null;
  locked_by: string | null;
  locked_at: string | null;
  completed_at: string | null;
  updated_at: string | null;
  error: string | null;
}

export interface LiveWorker extends WorkerPresence {
  inFlight: Array<{ id: string; queue: string; kind: string; locked_at: Date | null; attempts: number }>;
}

export interface LiveHubOptions {
  admin: Admin;
  store: Store;
  /** Where the listener connects; without one the hub only ticks on its interval. */
  connectionString: string | undefined;
  logger: Logger;
  /** Time between ticks while anyone watches, ms. Default 1000. */
  intervalMs?: number;
  /** A stream is ended after this long (the browser reconnects and signs in again with its cookie), ms. Default 5 min. */
  maxStreamMs?: number;
  /** The error a page may show of a job (redacted). */
  errorOf: (job: { id: string; queue: string; kind: string; last_error: string | null }) => string | null;
}

interface Viewer {
  interest: LiveInterest;
  /** The session the stream was opened with (ended on sign-out). */
  session: string;
  res: http.ServerResponse;
  timer: NodeJS.Timeout;
}

const MAX_WATCHED = 1000;
const HEARTBEAT_MS = 15_000;
/** Snapshots are at least this far apart, however many notifications arrive. */
const MIN_GAP_MS = 250;
/** How long the hub keeps its listener after the last viewer left. */
const IDLE_MS = 3000;
/** The longest wait between snapshots while they fail (a database that is down). */
const MAX_BACKOFF_MS = 30_000;

export class LiveHub {
  /** Snapshots read (each is one to three statements, for every viewer together). */
  ticks = 0;
  /** Statements the hub sent. */
  queries = 0;
  private readonly viewers = new Set<Viewer>();
  private listener: Listener | undefined;
  /** Snapshots while anyone watches: every intervalMs, sooner after a notification (tickSoon). */
  private readonly ticker: Service<void>;
  /** A comment line to every stream every HEARTBEAT_MS, so proxies keep idle streams open. */
  private readonly heartbeat: Service<void>;
  private readonly live: LiveStore;
  private watching = false;
  private soon: NodeJS.Timeout | undefined;
  private idle: NodeJS.Timeout | undefined;
  private lastTick = 0;
  /** True while a snapshot runs; `again`: one was asked for meanwhile, so the next follows at MIN_GAP_MS. */
  private inTick = false;
  private again = false;
  private last: { queues?: string; workers?: string; jobs: Map<string, string> } = { jobs: new Map() };
  private readonly intervalMs: number;
  private readonly maxStreamMs: number;

  constructor(private readonly o: LiveHubOptions) {
    this.intervalMs = o.intervalMs ?? 1000;
    this.maxStreamMs = o.maxStreamMs ?? 300_000;
    this.live = new LiveStore(o.store);
    this.ticker = new Service({
      name: "dashboard live feed",
      intervalMs: this.intervalMs,
      run: () => this.runTick(),
      logger: o.logger,
      // Never sooner than MIN_GAP_MS after the previous snapshot, however many notifications arrive.
      next: () => {
        const wait = this.again ? MIN_GAP_MS : this.intervalMs;
        this.again = false;
        return Math.max(MIN_GAP_MS, wait);
      },
      maxBackoffMs: MAX_BACKOFF_MS,
    });
    this.heartbeat = new Service({
      name: "dashboard live heartbeat",
      intervalMs: HEARTBEAT_MS,
      run: async () => {
        for (const v of this.viewers) v.res.write(": ping\n\n");
      },
      logger: o.logger,
      firstPass: "spread",
    });
  }

  /** Viewers connected now. */
  get size(): number {
    return this.viewers.size;
  }

  /** The listener's server process id, while connected. */
  get listenerPid(): number | undefined {
    return this.listener?.backendPid;
  }

  /** Opens an event stream on `res` for `interest`; it ends when the client leaves, at maxStreamMs, or on close(). */
  serve(req: http.IncomingMessage, res: http.ServerResponse, interest: LiveInterest, session: string): void {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "x-accel-buffering": "no",
      connection: "keep-alive",
    });
    res.flushHeaders();
    // retry: how long the browser waits before reconnecting after the stream ends.
    res.write("retry: 2000\n\n");
    const viewer: Viewer = {
      interest,
      session,
      res,
      timer: setTimeout(() => this.drop(viewer), this.maxStreamMs),
    };
    viewer.timer.unref();
    this.viewers.add(viewer);
    req.on("close", () => this.drop(viewer));
    res.on("error", () => this.drop(viewer));
    // What is known already costs nothing: sent from the last snapshot.
    if (interest.queues && this.last.queues) this.write(viewer, "queues", this.last.queues);
    if (interest.workers && this.last.workers) this.write(viewer, "workers", this.last.workers);
    let unknown = false;
    for (const id of interest.jobs) {
      const known = this.last.jobs.get(id);
      if (known) this.write(viewer, "job", known);
      else unknown = true;
    }
    clearTimeout(this.idle);
    if (!this.watching) this.startWatching();
    else if (unknown || (interest.workers && !this.last.workers)) this.tickSoon();
  }

  /** Ends every stream opened with this session (sign-out). */
  endSession(session: string): void {
    for (const v of this.viewers) if (v.session === session) this.drop(v);
  }

  /** Ends every stream and stops watching. */
  async close(): Promise<void> {
    for (const v of this.viewers) this.drop(v);
    await this.stopWatching();
  }

  private drop(viewer: Viewer): void {
    if (!this.viewers.delete(viewer)) return;
    clearTimeout(viewer.timer);
    viewer.res.end();
    if (this.viewers.size > 0) return;
    // A reload leaves and comes back at once: keep the listener a moment.
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.viewers.size === 0) void this.stopWatching();
    }, IDLE_MS);
    this.idle.unref();
  }

  private startWatching(): void {
    this.watching = true;
    if (this.o.connectionString && !this.listener) {
      this.listener = new Listener({
        connectionString: this.o.connectionString,
        channel: this.o.store.schema.channel,
        applicationName: `skipq:live:${this.o.store.schema.name}`.slice(0, 63),
        logger: this.o.logger,
        onNotify: (message) => this.notified(message),
      });
      void this.listener.start();
    }
    // The first snapshot at once (Service's first pass): the new viewer waits for nothing else.
    this.ticker.start();
    this.heartbeat.start();
  }

  private async stopWatching(): Promise<void> {
    this.watching = false;
    clearTimeout(this.idle);
    clearTimeout(this.soon);
    this.soon = this.idle = undefined;
    const listener = this.listener;
    this.listener = undefined;
    await Promise.all([this.ticker.stop(), this.heartbeat.stop()]);
    this.last = { jobs: new Map() };
    await listener?.stop();
  }

  /** A notification on the schema's channel: a queue name (an enqueue) or a "!" control message. */
  private notified(message: string): void {
    if (!message.startsWith("!")) {
      const data = JSON.stringify({ queue: message });
      for (const v of this.viewers) this.write(v, "enqueued", data);
    }
    this.tickSoon();
  }

  /**
   * A tick soon: 50 ms from now, coalescing a burst of notifications into one
   * snapshot, and never sooner than MIN_GAP_MS after the previous one; asked
   * for while a snapshot runs, the next one follows it by MIN_GAP_MS.
   */
  private tickSoon(): void {
    if (this.soon || this.viewers.size === 0 || !this.watching) return;
    this.soon = setTimeout(
      () => {
        this.soon = undefined;
        if (this.inTick) this.again = true;
        else if (Date.now() - this.lastTick < MIN_GAP_MS) this.tickSoon();
        else this.ticker.wake();
      },
      Math.max(50, this.lastTick + MIN_GAP_MS - Date.now()),
    );
    this.soon.unref();
  }

  /** One snapshot (the ticker's pass). */
  private async runTick(): Promise<void> {
    this.inTick = true;
    this.lastTick = Date.now();
    try {
      await this.snapshot();
    } finally {
      this.inTick = false;
    }
  }

  private async snapshot(): Promise<void> {
    let queues = false;
    let workers = false;
    const ids = new Set<string>();
    for (const v of this.viewers) {
      queues ||= v.interest.queues;
      workers ||= v.interest.workers;
      for (const id of v.interest.jobs) if (ids.size < MAX_WATCHED) ids.add(id);
    }
    if (this.viewers.size === 0) return;
    this.ticks++;
    const [q, w, j] = await Promise.all([
      queues ? this.count(this.o.admin.overview()) : undefined,
      workers ? this.readWorkers() : undefined,
      ids.size > 0 ? this.readJobs([...ids]) : undefined,
    ]);
    if (q) {
      // Whole seconds: the oldest job's age alone would otherwise make every tick a change.
      const text = JSON.stringify(
        (q satisfies QueueOverview[]).map((r) => ({
          ...r,
          oldestPendingSeconds: r.oldestPendingSeconds === null ? null : Math.round(r.oldestPendingSeconds),
        })),
      );
      if (text !== this.last.queues) {
        this.last.queues = text;
        for (const v of this.viewers) if (v.interest.queues) this.write(v, "queues", text);
      }
    }
    if (w) {
      const text = JSON.stringify(w);
      if (text !== this.last.workers) {
        this.last.workers = text;
        for (const v of this.viewers) if (v.interest.workers) this.write(v, "workers", text);
      }
    }
    if (j) {
      const seen = new Map<string, string>();
      for (const id of ids) {
        const job = j.get(id);
        seen.set(id, JSON.stringify(job ?? { id, gone: true }));
      }
      for (const [id, text] of seen) {
        if (this.last.jobs.get(id) === text) continue;
        for (const v of this.viewers) if (v.interest.jobs.includes(id)) this.write(v, "job", text);
      }
      this.last.jobs = seen;
    }
  }

  private count<T>(query: Promise<T>): Promise<T> {
    this.queries++;
    return query;
  }

  private async readWorkers(): Promise<LiveWorker[]> {
    this.queries += 2;
    return workersWithInFlight(this.o.admin, this.live);
  }

  private async readJobs(ids: string[]): Promise<Map<string, LiveJob>> {
    const rows = await this.count(this.live.liveJobs({ ids }));
    const out = new Map<string, LiveJob>();
    for (const r of rows) {
      out.set(r.id, {
        id: r.id,
        queue: r.queue,
        kind: r.kind,
        status: r.status,
        priority: r.priority,
        attempts: r.attempts,
        max_attempts: r.max_attempts,
        run_at: iso(r.run_at),
        locked_by: r.locked_by,
        locked_at: iso(r.locked_at),
        completed_at: iso(r.completed_at),
        updated_at: iso(r.updated_at),
        error: this.o.errorOf({ id: r.id, queue: r.queue, kind: r.kind, last_error: r.last_error }),
      });
    }
    return out;
  }

  private write(viewer: Viewer, event: string, data: string): void {
    viewer.res.write(`event: ${event}\ndata: ${data}\n\n`);
  }
}

/** The live workers, each with the jobs it holds now (two statements: presence and the running index). */
export async function workersWithInFlight(admin: Admin, live: LiveStore): Promise<LiveWorker[]> {
  const [present, running] = await Promise.all([admin.workers(), live.liveRunning()]);
  const byWorker = new Map<string, LiveWorker["inFlight"]>();
  for (const r of running) {
    const list = byWorker.get(r.locked_by) ?? [];
    list.push({ id: r.id, queue: r.queue, kind: r.kind, locked_at: r.locked_at, attempts: r.attempts });
    byWorker.set(r.locked_by, list);
  }
  return present.map((w) => ({ ...w, inFlight: byWorker.get(w.id) ?? [] }));
}

/** A timestamp as ISO text; an infinite or out-of-range one as null. */
function iso(value: unknown): string | null {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) return null;
  return value.toISOString();
}
