/**
 * The transactional outbox (role `outbox`): `publish` writes an event in the
 * caller's transaction; `OutboxRelay` claims undelivered events (SKIP LOCKED,
 * fenced leases) and hands them to a sink, at least once and in order per key.
 *
 * Invariants: an event exists iff the publishing transaction committed; a key
 * is held by one relay at a time and its events are sent one after another in
 * id order, a failure stopping the rest (see src/sql/outbox.ts); an event is marked
 * delivered only after its sink confirmed it, and only under its own lease.
 * It never holds a transaction open while a sink runs.
 */
import { EventEmitter } from "node:events";
import os from "node:os";
import { type BackoffOptions, backoffMs } from "../core/backoff.js";
import type { Queryable, Skipq } from "../core/client.js";
import { formatError } from "../core/errorFormat.js";
import { ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { assertInt, assertName, type Duration, encodeHeaders, encodePayload, toMs } from "../core/validate.js";
import type { Statement } from "../db/statements.js";
import type { Store } from "../db/store.js";

/** An event as a sink receives it. */
export interface OutboxEvent {
  /** The outbox row id (a bigint as a string): increases with publish order within a key. */
  id: string;
  topic: string;
  key: string;
  event: unknown;
  headers: Record<string, string>;
  /** This delivery attempt's number, from 1. */
  attempt: number;
  createdAt: Date;
}

/** Where the relay delivers. `deliver` resolves once the destination has durably accepted the event. */
export interface OutboxSink {
  /** Shown in logs. */
  readonly name: string;
  /** Deliver one event; throw (or reject) to retry it later. Must stop when `signal` aborts. */
  deliver(event: OutboxEvent, signal: AbortSignal): Promise<void>;
  /** Release connections; called by `OutboxRelay.stop()`. */
  close?(): Promise<void>;
}

export interface PublishOptions {
  /** Small string metadata delivered with the event (e.g. a trace context). */
  headers?: Record<string, string>;
}

/** Writes events into the outbox; one per schema. */
export class Outbox {
  /** @internal */
  readonly store: Store;

  constructor(readonly skipq: Skipq) {
    this.store = skipq.store;
  }

  /** @internal */
  get sql() {
    return this.store.sql.outbox;
  }

  /**
   * Publish `event` under `topic` and `key` inside the caller's transaction `tx`:
   * the event exists iff that transaction commits, and events of one key are
   * delivered in the order their transactions published them. Publishers of the
   * same key wait for each other until commit (a transaction-scoped lock).
   */
  async publish(
    tx: Queryable,
    topic: string,
    key: string,
    event: unknown,
    options: PublishOptions = {},
  ): Promise<{ id: string }> {
    assertName("topic", topic);
    if (typeof key !== "string" || key.length === 0 || key.length > 512 || key.includes("\u0000")) {
      throw new ValidationError("outbox key must be a non-empty string of at most 512 characters without NUL");
    }
    const body = encodePayload(event, this.skipq.maxPayloadBytes);
    const headers = options.headers === undefined ? null : encodeHeaders(options.headers);
    const { rows } = await this.store.query(
      this.sql.outboxInsert,
      [topic, key, body, headers, `skipq.outbox:${this.store.schema.name}`],
      tx,
    );
    return { id: String(rows[0].id) };
  }

  /** A relay delivering this schema's outbox to `sink`; call `start()`. */
  relay(options: RelayOptions): OutboxRelay {
    return new OutboxRelay(this, options);
  }

  /** Undelivered events and the age of the oldest. */
  async backlog(): Promise<{ undelivered: number; oldestMs: number }> {
    const { rows } = await this.store.query(this.sql.outboxBacklog);
    return { undelivered: rows[0].undelivered, oldestMs: rows[0].oldest_ms };
  }

  /** Delete events delivered longer ago than `olderThan`, in batches; returns how many. */
  async prune(olderThan: Duration, batchSize = 1000): Promise<number> {
    const ms = toMs("olderThan", olderThan);
    let total = 0;
    for (;;) {
      const { rowCount } = await this.store.query(this.sql.outboxPrune, [ms, batchSize]);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) return total;
    }
  }
}

export interface RelayOptions {
  /** Where events go. */
  sink: OutboxSink;
  /** Most keys claimed per pass. Default 100. */
  batchSize?: number;
  /**
   * Most events of one key claimed per pass, delivered one after another. Higher
   * means more throughput per key; after a relay crash, up to this many events of
   * a key that reached the sink may be sent again (consumers drop ids at or below
   * the last id seen for the key). 1: only the last event can repeat. Default 10.
   */
  perKeyBatch?: number;
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

interface Claimed {
  lease: string;
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
  private readonly outbox: Outbox;
  private readonly batchSize: number;
  private readonly perKeyBatch: number;
  private readonly lockMs: number;
  private readonly deliveryMs: number;
  private readonly pollMs: number;
  private readonly backoff: BackoffOptions;
  private readonly logger: Logger;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(outbox: Outbox, options: RelayOptions) {
    super();
    if (!options || typeof options.sink?.deliver !== "function") {
      throw new ValidationError("relay needs a sink: { sink: webhookSink(...) | rabbitmqSink(...) | natsSink(...) }");
    }
    this.outbox = outbox;
    this.sink = options.sink;
    this.batchSize = assertInt("batchSize", options.batchSize ?? 100, 1, 10_000);
    this.perKeyBatch = assertInt("perKeyBatch", options.perKeyBatch ?? 10, 1, 1000);
    this.lockMs = toMs("lockTimeout", options.lockTimeout ?? "30s", { allowZero: false });
    this.deliveryMs = toMs("deliveryTimeout", options.deliveryTimeout ?? "10s", { allowZero: false });
    if (this.deliveryMs >= this.lockMs) {
      throw new ValidationError(
        `deliveryTimeout (${this.deliveryMs} ms) must be below lockTimeout (${this.lockMs} ms), or a slow delivery could land after its lease moved to another relay`,
      );
    }
    this.pollMs = toMs("pollInterval", options.pollInterval ?? 500, { allowZero: false });
    this.backoff = { baseMs: 500, maxMs: 60_000, jitter: 0.2, ...options.backoff };
    this.id = options.relayId ?? `${os.hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
    this.logger = outbox.skipq.logger;
  }

  /** Starts the delivery loop; idempotent. */
  start(): void {
    if (this.state !== "idle") return;
    this.state = "running";
    this.loop = this.run();
  }

  /** Stops claiming, waits for the pass in progress, closes the sink. Safe before start and twice. */
  async stop(): Promise<void> {
    if (this.state === "idle" || this.state === "stopped") {
      this.state = "stopped";
      return;
    }
    this.state = "stopping";
    this.wake?.();
    await this.loop;
    await this.sink.close?.();
    this.state = "stopped";
    this.emit("stopped");
  }

  /**
   * One pass: claim, deliver (keys concurrently, each key's events in order),
   * record outcomes. Returns how many events were claimed.
   */
  async runOnce(): Promise<number> {
    const store = this.outbox.store;
    const { rows } = await store.query(this.outbox.sql.outboxClaim, [
      this.batchSize,
      this.id,
      this.lockMs,
      this.perKeyBatch,
    ]);
    if (rows.length === 0) return 0;
    this.stats.claimed += rows.length;
    const runs = new Map<string, Claimed[]>();
    for (const r of rows) {
      const claimed: Claimed = {
        lease: String(r.lease),
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
        run.sort((a, b) => (BigInt(a.event.id) < BigInt(b.event.id) ? -1 : 1));
        // One budget per key for the whole run, below the lease, so no delivery outlives the lease.
        const signal = AbortSignal.timeout(this.deliveryMs);
        for (let i = 0; i < run.length; i++) {
          const claimed = run[i] as Claimed;
          try {
            if (signal.aborted && i > 0) {
              released.push(...run.slice(i));
              return;
            }
            await this.sink.deliver(claimed.event, signal);
            delivered.push(claimed);
          } catch (error) {
            failed.push({ ...claimed, error: error ?? new Error("sink rejected without a reason") });
            // Later events of the key must wait for this one.
            released.push(...run.slice(i + 1));
            return;
          }
        }
      }),
    );
    const fenced = async (statement: Statement, list: Claimed[], extra: unknown[][] = []) => {
      if (list.length === 0) return new Set<string>();
      const ids = list.map((c) => c.event.id);
      const { rows: done } = await store.query<{ id: unknown }>(statement, [ids, list.map((c) => c.lease), ...extra]);
      this.noteStale(ids, done);
      return new Set(done.map((r) => String(r.id)));
    };
    const kept = await fenced(this.outbox.sql.outboxDeliveredMany, delivered);
    this.stats.delivered += kept.size;
    if (kept.size > 0)
      this.emit(
        "delivered",
        delivered.filter((c) => kept.has(c.event.id)).map((c) => c.event),
      );
    await fenced(this.outbox.sql.outboxFailedMany, failed, [
      failed.map((c) => formatError(c.error)),
      failed.map((c) => backoffMs(c.event.attempt, this.backoff)),
    ]);
    await fenced(this.outbox.sql.outboxReleaseMany, released);
    this.stats.failed += failed.length;
    for (const c of failed) {
      this.logger.warn({ err: c.error, id: c.event.id, sink: this.sink.name }, "outbox delivery failed; will retry");
      this.emit("failed", c.event, c.error);
    }
    return rows.length;
  }

  private noteStale(sent: string[], rows: Array<{ id: unknown }>): void {
    if (rows.length === sent.length) return;
    const kept = new Set(rows.map((r) => String(r.id)));
    const stale = sent.filter((id) => !kept.has(id));
    this.stats.staleOutcomes += stale.length;
    this.emit("staleOutcome", stale);
  }

  private async run(): Promise<void> {
    let errors = 0;
    while (this.state === "running") {
      let claimed = 0;
      try {
        claimed = await this.runOnce();
        errors = 0;
      } catch (error) {
        errors++;
        this.emit("warning", error, "relay");
        this.logger.warn({ err: error }, "outbox relay pass failed; retrying");
      }
      // Something was claimed: the next event of each key may be claimable now, so go again at once.
      if (claimed > 0) continue;
      // Idle: wait a poll interval; after errors, back off (capped at 30 s).
      const waitMs = errors > 0 ? Math.min(this.pollMs * 2 ** Math.min(errors, 6), 30_000) : this.pollMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }
}
