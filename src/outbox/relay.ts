/**
 * The outbox relay (role `outbox`): claims undelivered events (SKIP LOCKED,
 * fenced leases) and hands them to a sink, at least once and in order per key.
 *
 * Invariants: a key is held by one relay at a time and its claimed run is sent
 * in id order (one event at a time, or pipelined on the sink's one ordered
 * channel), a failure stopping the rest (see src/db/sql/outbox.ts); an event
 * is marked delivered only after its sink confirmed it and every earlier event
 * of its run, and only under its own lease. It never holds a transaction open
 * while a sink runs. Its loop is a Service (src/shared/service.ts): passes never
 * overlap, and failed passes and failed deliveries are each logged throttled
 * (the first, every 20th, one line when it works again: failureLog.ts).
 */
import { EventEmitter } from "node:events";
import { type BackoffOptions, backoffMs, retryWaitMs } from "../core/backoff.js";
import { formatError } from "../core/errorFormat.js";
import { ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { assertInt, type Duration, toMs } from "../core/validate.js";
import type { Statement } from "../db/statements.js";
import type { Store } from "../db/store.js";
import { FailureLog } from "../shared/failureLog.js";
import { instanceId, refused } from "../shared/instance.js";
import { Service } from "../shared/service.js";
import type { OutboxEvent, OutboxSink } from "./types.js";

/** What a relay needs from its outbox. */
export interface RelaySource {
  store: Store;
  logger: Logger;
}

export interface RelayOptions {
  /** Where events go. */
  sink: OutboxSink;
  /** Most keys claimed per pass. Default 100. */
  batchSize?: number;
  /**
   * Most events of one key claimed per pass (a run), delivered in id order.
   * Higher means more throughput per key and fewer commits per event; after a
   * relay crash, up to this many events of a key that reached the sink may be
   * sent again (consumers drop ids at or below the last id seen for the key).
   * 1: only the last event can repeat. A pass claims about 10,000 events at
   * most (or `batchSize`, if larger), shared by its keys, so with many keys
   * each run is shorter. Default 1000 when runs are pipelined (`pipeline`
   * and a sink with `deliverBatch`), else 10.
   */
  perKeyBatch?: number;
  /**
   * Send each run through the sink's `deliverBatch` when it has one (the
   * RabbitMQ and NATS sinks do): the run's events go out back to back and
   * their confirmations are awaited together. false: one event at a time,
   * each sent only after the previous one was confirmed, so a destination
   * that refuses one event can never have accepted a later one of its key
   * (docs/outbox.md, "Pipelined runs"). Default true.
   */
  pipeline?: boolean;
  /** How long a claim leases its events; an expired lease is claimed again by any relay. Default "30s". */
  lockTimeout?: Duration;
  /** Longest a key's deliveries in one pass may take before they are aborted and retried; must be below lockTimeout. Default "10s". */
  deliveryTimeout?: Duration;
  /** Idle wait between passes that found nothing. Default "500ms". */
  pollInterval?: Duration;
  /** Retry backoff per event (retries never end: a key waits for its oldest event). Default { baseMs: 500, maxMs: 60_000, jitter: 0.2 }. */
  backoff?: Partial<BackoffOptions>;
  /** Identifies this relay in locked_by. Default host:pid:random. */
  relayId?: string;
}

/**
 * About how many events one pass claims over all its keys: enough that a
 * pass's two commits are shared by many events, few enough that a pass
 * delivers well within `deliveryTimeout` (10,000 take ~0.7 s at 15,000/s).
 */
const PASS_EVENTS = 10_000;

/** A row of outboxClaim / outboxClaimKeys (bigints arrive as strings). */
interface ClaimRow {
  id: string;
  topic: string;
  key: string;
  event: unknown;
  headers: Record<string, string> | null;
  attempts: number;
  lease: string;
  created_at: Date;
}

interface Claimed {
  lease: string;
  /** The id as a bigint, for sorting a run. */
  order: bigint;
  event: OutboxEvent;
}

export interface RelayEvents {
  delivered: [events: ReadonlyArray<OutboxEvent>];
  failed: [event: OutboxEvent, error: unknown];
  /** Deliveries whose lease had moved on before they were recorded (another relay took over). */
  staleOutcome: [ids: string[]];
  /** A database error the relay survived (it retries). */
  warning: [error: unknown, context: string];
  stopped: [];
}

/**
 * The relay (role `outbox`): start/stop/runOnce. Any number may run against
 * one schema; each event goes to exactly one of them at a time.
 */
export class OutboxRelay extends EventEmitter<RelayEvents> {
  readonly id: string;
  readonly sink: OutboxSink;
  readonly stats = { claimed: 0, delivered: 0, failed: 0, staleOutcomes: 0 };
  private readonly store: Store;
  private readonly batchSize: number;
  private readonly perKeyBatch: number;
  private readonly pipeline: boolean;
  private readonly lockMs: number;
  private readonly deliveryMs: number;
  private readonly pollMs: number;
  private readonly backoff: BackoffOptions;
  private readonly logger: Logger;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  /** Keys whose last run was wholly delivered and recorded: the next claim may continue them without a scan. */
  private continueKeys: string[] = [];
  /** Whether the last scan for heads found batchSize keys, and when (performance.now()) the next one is due otherwise. */
  private lastScanFull = true;
  private nextScanAt = 0;
  /** The delivery loop: a pass at once after one that claimed, else after pollInterval; backoff after failed passes. */
  private readonly service: Service<number>;
  /** Passes whose deliveries failed, logged throttled (a sink that is down fails every pass). */
  private readonly deliveryFailures: FailureLog;

  constructor(source: RelaySource, options: RelayOptions) {
    super();
    if (!options || typeof options.sink?.deliver !== "function") {
      throw new ValidationError("relay needs a sink: { sink: webhookSink(...) | rabbitmqSink(...) | natsSink(...) }");
    }
    this.store = source.store;
    this.sink = options.sink;
    this.batchSize = assertInt("batchSize", options.batchSize ?? 100, 1, 10_000);
    this.pipeline = (options.pipeline ?? true) && typeof this.sink.deliverBatch === "function";
    this.perKeyBatch = assertInt("perKeyBatch", options.perKeyBatch ?? (this.pipeline ? 1000 : 10), 1, 10_000);
    this.lockMs = toMs("lockTimeout", options.lockTimeout ?? "30s", { allowZero: false });
    this.deliveryMs = toMs("deliveryTimeout", options.deliveryTimeout ?? "10s", { allowZero: false });
    if (this.deliveryMs >= this.lockMs) {
      throw new ValidationError(
        `deliveryTimeout (${this.deliveryMs} ms) must be below lockTimeout (${this.lockMs} ms), or a slow delivery could land after its lease moved to another relay`,
      );
    }
    this.pollMs = toMs("pollInterval", options.pollInterval ?? 500, { allowZero: false });
    this.backoff = { baseMs: 500, maxMs: 60_000, jitter: 0.2, ...options.backoff };
    this.id = options.relayId ?? instanceId();
    this.logger = source.logger;
    this.deliveryFailures = new FailureLog(this.logger, "outbox delivery", "will retry");
    this.service = new Service({
      name: "outbox relay",
      intervalMs: this.pollMs,
      run: () => this.pass(),
      logger: this.logger,
      // Something was claimed: the next event of each key may be claimable now, so go again at once.
      next: (claimed) => (claimed > 0 ? 0 : this.pollMs),
      // After errors, back off from the poll interval, capped at 64 of them or 30 s, unjittered.
      retryWait: (failures) => retryWaitMs(failures + 1, this.pollMs, Math.min(this.pollMs * 64, 30_000), false),
      onFailed: (error) => this.emit("warning", error, "relay"),
      // A started relay keeps its process alive, as its own loop did.
      keepAlive: true,
    });
  }

  private get sql() {
    return this.store.sql.outbox;
  }

  /** Starts the delivery loop; idempotent. */
  start(): void {
    if (this.state !== "idle") return;
    this.state = "running";
    this.service.start();
  }

  /** Stops claiming, waits for the pass in progress, closes the sink. Safe before start and twice. */
  async stop(): Promise<void> {
    if (this.state === "idle" || this.state === "stopped") {
      this.state = "stopped";
      return;
    }
    this.state = "stopping";
    await this.service.stop();
    await this.sink.close?.();
    this.state = "stopped";
    this.emit("stopped");
  }

  /**
   * One pass: claim, deliver (keys concurrently, each key's events in order),
   * record outcomes. Returns how many events were claimed. Joins a pass in
   * progress (the loop's, or another runOnce's).
   */
  runOnce(): Promise<number> {
    return this.service.runOnce();
  }

  private async pass(): Promise<number> {
    const rows = await this.claim();
    if (rows.length === 0) return 0;
    this.stats.claimed += rows.length;
    const runs = new Map<string, Claimed[]>();
    for (const r of rows) {
      const claimed: Claimed = {
        lease: String(r.lease),
        order: BigInt(r.id),
        event: {
          id: String(r.id),
          topic: r.topic,
          key: r.key,
          event: r.event,
          headers: r.headers ?? {},
          attempt: r.attempts,
          createdAt: r.created_at,
        },
      };
      const run = runs.get(claimed.event.key);
      if (run) run.push(claimed);
      else runs.set(claimed.event.key, [claimed]);
    }
    const delivered: Claimed[] = [];
    const failed: Array<Claimed & { error: unknown }> = [];
    const released: Claimed[] = [];
    await Promise.all(
      [...runs.values()].map(async (run) => {
        run.sort((a, b) => (a.order < b.order ? -1 : 1));
        // One budget per key for the whole run, below the lease, so no delivery outlives the lease.
        const { confirmed, error } = await this.deliverRun(run, AbortSignal.timeout(this.deliveryMs));
        // Only the confirmed prefix is delivered; the first event after it failed (when it was
        // attempted) and the later ones wait for it, unattempted.
        for (let i = 0; i < confirmed; i++) delivered.push(run[i] as Claimed);
        if (confirmed === run.length) return;
        if (error === undefined) {
          released.push(...run.slice(confirmed));
        } else {
          failed.push({ ...(run[confirmed] as Claimed), error });
          released.push(...run.slice(confirmed + 1));
        }
      }),
    );
    const fenced = async (statement: Statement, list: Claimed[], extra: unknown[][] = []) => {
      if (list.length === 0) return new Set<string>();
      const ids = list.map((c) => c.event.id);
      const { rows } = await this.store.query<{ id: unknown }>(statement, [ids, list.map((c) => c.lease), ...extra]);
      const accepted = rows.map((r) => String(r.id));
      this.noteStale(ids, accepted);
      return new Set(accepted);
    };
    const kept = await fenced(this.sql.outboxDeliveredMany, delivered);
    this.stats.delivered += kept.size;
    // Keys whose whole run was delivered and recorded may have more events: the next pass continues them.
    this.continueKeys = [];
    for (const [key, run] of runs) {
      if (run.every((c) => kept.has(c.event.id))) this.continueKeys.push(key);
    }
    if (kept.size > 0)
      this.emit(
        "delivered",
        delivered.filter((c) => kept.has(c.event.id)).map((c) => c.event),
      );
    await fenced(this.sql.outboxFailedMany, failed, [
      failed.map((c) => formatError(c.error)),
      failed.map((c) => backoffMs(c.event.attempt, this.backoff)),
    ]);
    await fenced(this.sql.outboxReleaseMany, released);
    this.stats.failed += failed.length;
    for (const c of failed) this.emit("failed", c.event, c.error);
    // One line per pass, not per event, and throttled: a sink that is down fails every event of every pass.
    const first = failed[0];
    if (first)
      this.deliveryFailures.failed(
        first.error,
        { id: first.event.id, failed: failed.length, sink: this.sink.name },
        failed.length === 1
          ? "outbox delivery failed; will retry"
          : `outbox delivery of ${failed.length} events failed (the first one's error attached); will retry`,
      );
    else if (kept.size > 0) this.deliveryFailures.succeeded();
    return rows.length;
  }

  /**
   * Claims the next runs. Normally the scan for heads (oldest first, over
   * every key). While the last scan found fewer than `batchSize` keys (so it
   * walked the whole backlog to find them), the keys just delivered are
   * continued by probing their heads directly, and the scan runs again after
   * `pollInterval` or four times its own last duration, whichever is longer,
   * or as soon as nothing is left to continue: a key that appears meanwhile
   * waits about that long.
   */
  private async claim(): Promise<ClaimRow[]> {
    const tail = [this.id, this.lockMs, this.perKeyBatch, Math.max(PASS_EVENTS, this.batchSize)];
    const now = performance.now();
    if (this.continueKeys.length > 0 && !this.lastScanFull && now < this.nextScanAt) {
      const { rows } = await this.store.query<ClaimRow>(this.sql.outboxClaimKeys, [
        this.continueKeys.slice(0, this.batchSize),
        ...tail,
      ]);
      if (rows.length > 0) return rows;
      this.continueKeys = [];
    }
    const { rows } = await this.store.query<ClaimRow>(this.sql.outboxClaim, [this.batchSize, ...tail]);
    // At most a fifth of the time goes to scans that find few keys (each walks the whole backlog).
    this.nextScanAt = now + Math.max(this.pollMs, 4 * (performance.now() - now));
    this.lastScanFull = new Set(rows.map((r) => r.key)).size >= this.batchSize;
    return rows;
  }

  /**
   * Delivers one key's run (id order) and says how long a prefix the sink
   * confirmed; `error` is set when the event after that prefix was attempted
   * and failed, unset when the run stopped before it (the budget ran out).
   */
  private async deliverRun(run: Claimed[], signal: AbortSignal): Promise<{ confirmed: number; error?: unknown }> {
    if (this.pipeline && run.length > 1) {
      const events = run.map((c) => c.event);
      try {
        const outcome = await (this.sink.deliverBatch as NonNullable<OutboxSink["deliverBatch"]>)(events, signal);
        const confirmed = outcome?.confirmed;
        if (!Number.isInteger(confirmed) || confirmed < 0 || confirmed > run.length) {
          return {
            confirmed: 0,
            error: new Error(`sink ${this.sink.name} reported ${confirmed} of ${run.length} confirmed`),
          };
        }
        if (confirmed === run.length) return { confirmed };
        return {
          confirmed,
          error: outcome.error ?? new Error(`sink ${this.sink.name} confirmed ${confirmed} of ${run.length} events`),
        };
      } catch (error) {
        return { confirmed: 0, error: error ?? new Error("sink rejected without a reason") };
      }
    }
    for (let i = 0; i < run.length; i++) {
      if (signal.aborted && i > 0) return { confirmed: i };
      try {
        await this.sink.deliver((run[i] as Claimed).event, signal);
      } catch (error) {
        return { confirmed: i, error: error ?? new Error("sink rejected without a reason") };
      }
    }
    return { confirmed: run.length };
  }

  private noteStale(sent: string[], accepted: string[]): void {
    const stale = refused(sent, accepted);
    if (stale.length === 0) return;
    this.stats.staleOutcomes += stale.length;
    this.emit("staleOutcome", stale);
  }
}
