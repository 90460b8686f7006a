/**
 * Prometheus metrics, every one named `skipq_*`, on a registry of their own
 * (never prom-client's global one, so two skipq instances never collide).
 * Counters and histograms come from Worker events; queue-depth and health
 * gauges are read on scrape from `Admin.overview()`/`Admin.health()`, at most
 * once per `refreshInterval`, so a busy scraper cannot load the database. A
 * failed read keeps the last values and is counted; a scrape never throws.
 * Serving them on a port of their own is metricsServer.ts's.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { defaultLogger, type Logger } from "../core/logger.js";
import { type Duration, toMs } from "../core/validate.js";
import type { Skipq } from "../skipq.js";
import type { Worker } from "../worker/worker.js";
import { Admin } from "./admin.js";
import type { QueueOverview, ReplicaStatus } from "./adminTypes.js";
import { HEALTH_CHECKS, type HealthOptions, type HealthReport } from "./health.js";

export interface MetricsOptions {
  /** Reads queue depth (and health) on scrape from this client's database. Default: none (worker metrics only). */
  skipq?: Skipq;
  /** Registry to register on. Default: a new one. */
  registry?: Registry;
  /** Shortest time between two database reads for the gauges. Default "5s". */
  refreshInterval?: Duration;
  /** Export health warnings as gauges (reads pg_stat_activity and pg_stat_user_tables). Default true when `skipq` is given. */
  health?: boolean | HealthOptions;
  /** Where failed reads are reported. Default: the client's logger. */
  logger?: Logger;
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

interface Snapshot {
  queues: QueueOverview[];
  health: HealthReport | undefined;
  /** The read replica's lag, when the client reads from one (readConnectionString). */
  replica: ReplicaStatus | undefined;
}

export class SkipqMetrics {
  readonly registry: Registry;
  private readonly admin: Admin | undefined;
  private readonly refreshMs: number;
  private readonly healthOptions: HealthOptions | undefined;
  private readonly logger: Logger;
  private snapshot: Snapshot | undefined;
  private snapshotAt = 0;
  private reading: Promise<Snapshot | undefined> | undefined;
  /** The client reads from a replica (readConnectionString): its lag is read with the gauges. */
  private readonly readsReplica: boolean;

  readonly claimLatency: Histogram<"queue">;
  readonly claimDuration: Histogram;
  readonly jobDuration: Histogram<"queue" | "kind" | "outcome">;
  readonly claimed: Counter<"queue">;
  readonly completed: Counter<"queue" | "kind">;
  readonly failed: Counter<"queue" | "kind">;
  readonly dead: Counter<"queue" | "kind">;
  readonly reaped: Counter<"status">;
  readonly staleOutcomes: Counter;
  readonly leasesLost: Counter<"queue" | "kind">;
  readonly listenerConnected: Gauge<"worker">;
  readonly runningJobs: Gauge<"worker">;
  readonly readErrors: Counter;

  constructor(options: MetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    this.admin = options.skipq ? new Admin(options.skipq) : undefined;
    this.refreshMs = toMs("refreshInterval", options.refreshInterval ?? "5s");
    const health = options.health ?? true;
    this.healthOptions = this.admin && health !== false ? (health === true ? {} : health) : undefined;
    this.logger = options.logger ?? options.skipq?.logger ?? defaultLogger;
    const registers = [this.registry];

    this.claimLatency = new Histogram({
      name: "skipq_claim_latency_seconds",
      help: "Time from a job becoming runnable (run_at) to its claim, by the database clock",
      labelNames: ["queue"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.claimDuration = new Histogram({
      name: "skipq_claim_duration_seconds",
      help: "Round trip of a claim statement that returned jobs",
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.jobDuration = new Histogram({
      name: "skipq_job_duration_seconds",
      help: "Handler run time, by outcome (completed, retry, dead, snoozed, cancelled, released, lease-lost)",
      labelNames: ["queue", "kind", "outcome"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.claimed = new Counter({
      name: "skipq_jobs_claimed_total",
      help: "Jobs claimed",
      labelNames: ["queue"],
      registers,
    });
    this.completed = new Counter({
      name: "skipq_jobs_completed_total",
      help: "Jobs whose handler succeeded",
      labelNames: ["queue", "kind"],
      registers,
    });
    this.failed = new Counter({
      name: "skipq_jobs_failed_total",
      help: "Handler failures that will be retried",
      labelNames: ["queue", "kind"],
      registers,
    });
    this.dead = new Counter({
      name: "skipq_jobs_dead_total",
      help: "Jobs that died in a handler (failed permanently, or failed with no attempts left)",
      labelNames: ["queue", "kind"],
      registers,
    });
    this.reaped = new Counter({
      name: "skipq_leases_reaped_total",
      help: "Jobs whose lease expired, returned by this process's reaper, by new status (pending or dead)",
      labelNames: ["status"],
      registers,
    });
    this.staleOutcomes = new Counter({
      name: "skipq_stale_writes_rejected_total",
      help: "Outcomes the database rejected because the job's lease had moved on",
      registers,
    });
    this.leasesLost = new Counter({
      name: "skipq_leases_lost_total",
      help: "Running jobs whose lease was lost (expired and reaped, or cancelled); their handlers were aborted",
      labelNames: ["queue", "kind"],
      registers,
    });
    this.listenerConnected = new Gauge({
      name: "skipq_listener_connected",
      help: "1 while the worker's LISTEN connection is up, 0 while it polls only",
      labelNames: ["worker"],
      registers,
    });
    this.runningJobs = new Gauge({
      name: "skipq_worker_running_jobs",
      help: "Handlers running now",
      labelNames: ["worker"],
      registers,
    });
    const read = () => (this.admin ? this.read() : undefined);
    this.readErrors = new Counter({
      name: "skipq_metrics_read_errors_total",
      help: "Failed database reads for the depth and health gauges (last values kept)",
      registers,
      // Serialised before the gauges: read first, so a failure of this scrape is already counted.
      async collect() {
        await read();
      },
    });

    if (this.admin) this.registerDepthGauges(registers);
    if (this.healthOptions) this.registerHealthGauges(registers);
    this.readsReplica = options.skipq !== undefined && options.skipq.readStore !== options.skipq.store;
    if (this.readsReplica) this.registerReplicaGauges(registers);
  }

  /** Counts this worker's claims, outcomes, reaps and listener state. Returns a function that detaches. */
  observe(worker: Worker): () => void {
    const id = worker.id;
    this.listenerConnected.set({ worker: id }, 0);
    this.runningJobs.set({ worker: id }, 0);
    const onClaimed: Parameters<typeof worker.on<"claimed">>[1] = (jobs, info) => {
      this.claimDuration.observe(info.durationMs / 1000);
      for (const job of jobs) {
        this.claimed.inc({ queue: job.queue });
        const waited = (info.claimedAt.getTime() - job.runAt.getTime()) / 1000;
        this.claimLatency.observe({ queue: job.queue }, Math.max(0, waited));
      }
      this.runningJobs.set({ worker: id }, worker.running);
    };
    const onEnd: Parameters<typeof worker.on<"jobEnd">>[1] = (job, outcome, durationMs) => {
      const labels = { queue: job.queue, kind: job.kind };
      this.jobDuration.observe({ ...labels, outcome }, durationMs / 1000);
      if (outcome === "completed") this.completed.inc(labels);
      else if (outcome === "dead") this.dead.inc(labels);
      else if (outcome === "retry") this.failed.inc(labels);
      this.runningJobs.set({ worker: id }, worker.running);
    };
    const onStale = (ids: string[]) => this.staleOutcomes.inc(ids.length);
    const onLost: Parameters<typeof worker.on<"leaseLost">>[1] = (job) =>
      this.leasesLost.inc({ queue: job.queue, kind: job.kind });
    const onReaped: Parameters<typeof worker.on<"reaped">>[1] = (jobs) => {
      for (const job of jobs) this.reaped.inc({ status: job.status });
    };
    const onListener = (connected: boolean) => this.listenerConnected.set({ worker: id }, connected ? 1 : 0);
    worker.on("claimed", onClaimed);
    worker.on("jobEnd", onEnd);
    worker.on("staleOutcome", onStale);
    worker.on("leaseLost", onLost);
    worker.on("reaped", onReaped);
    worker.on("listener", onListener);
    return () => {
      worker.off("claimed", onClaimed);
      worker.off("jobEnd", onEnd);
      worker.off("staleOutcome", onStale);
      worker.off("leaseLost", onLost);
      worker.off("reaped", onReaped);
      worker.off("listener", onListener);
    };
  }

  /** The Prometheus text exposition. */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The gauges' database read, shared by every gauge of one scrape and cached for `refreshInterval`. */
  private read(): Promise<Snapshot | undefined> {
    if (this.snapshot && performance.now() - this.snapshotAt < this.refreshMs) return Promise.resolve(this.snapshot);
    if (this.reading) return this.reading;
    const admin = this.admin as Admin;
    this.reading = Promise.all([
      admin.overview(),
      this.healthOptions ? admin.health(this.healthOptions) : undefined,
      this.readsReplica ? admin.replica() : undefined,
    ])
      .then(
        ([queues, health, replica]) => {
          this.snapshot = { queues, health, replica };
          this.snapshotAt = performance.now();
          return this.snapshot;
        },
        (error) => {
          this.readErrors.inc();
          this.logger.warn({ err: error }, "skipq: reading queue depth for metrics failed; serving the last values");
          return this.snapshot;
        },
      )
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  private registerDepthGauges(registers: Registry[]): void {
    const metrics = this;
    new Gauge({
      name: "skipq_queue_jobs",
      help: "Jobs by queue and status (pending = runnable now, scheduled = pending in the future, waiting = for parent jobs, running, dead)",
      labelNames: ["queue", "status"],
      registers,
      async collect() {
        const snap = await metrics.read();
        if (!snap) return;
        this.reset();
        for (const q of snap.queues) {
          this.set({ queue: q.queue, status: "pending" }, q.pending);
          this.set({ queue: q.queue, status: "scheduled" }, q.scheduled);
          this.set({ queue: q.queue, status: "waiting" }, q.waiting);
          this.set({ queue: q.queue, status: "running" }, q.running);
          this.set({ queue: q.queue, status: "dead" }, q.dead);
        }
      },
    });
    new Gauge({
      name: "skipq_queue_oldest_pending_seconds",
      help: "How long the oldest runnable pending job has waited (0 when none)",
      labelNames: ["queue"],
      registers,
      async collect() {
        const snap = await metrics.read();
        if (!snap) return;
        this.reset();
        for (const q of snap.queues) this.set({ queue: q.queue }, q.oldestPendingSeconds ?? 0);
      },
    });
    new Gauge({
      name: "skipq_queue_paused",
      help: "1 when the queue is paused",
      labelNames: ["queue"],
      registers,
      async collect() {
        const snap = await metrics.read();
        if (!snap) return;
        this.reset();
        for (const q of snap.queues) this.set({ queue: q.queue }, q.paused ? 1 : 0);
      },
    });
  }

  private registerReplicaGauges(registers: Registry[]): void {
    const metrics = this;
    new Gauge({
      name: "skipq_replica_lag_seconds",
      help: "How far the read replica (readConnectionString) is behind the primary: time since the last commit it replayed, 0 once caught up",
      registers,
      async collect() {
        const replica = (await metrics.read())?.replica;
        if (replica?.lagMs != null) this.set(replica.lagMs / 1000);
      },
    });
    new Gauge({
      name: "skipq_replica_lag_bytes",
      help: "WAL bytes the primary wrote that the read replica has not replayed yet",
      registers,
      async collect() {
        const replica = (await metrics.read())?.replica;
        if (replica?.lagBytes != null) this.set(replica.lagBytes);
      },
    });
  }

  private registerHealthGauges(registers: Registry[]): void {
    const metrics = this;
    new Gauge({
      name: "skipq_health_warnings",
      help: "Health warnings by check (see docs/metrics.md); 0 means healthy",
      labelNames: ["check"],
      registers,
      async collect() {
        const health = (await metrics.read())?.health;
        if (!health) return;
        for (const check of HEALTH_CHECKS) this.set({ check }, health.warnings.filter((w) => w.check === check).length);
      },
    });
    new Gauge({
      name: "skipq_xmin_horizon_age",
      help: "Age in transactions of the oldest snapshot another session of this database holds (0 when none)",
      registers,
      async collect() {
        const health = (await metrics.read())?.health;
        if (health) this.set(health.oldestXminAge ?? 0);
      },
    });
    new Gauge({
      name: "skipq_xmin_horizon_seconds",
      help: "How long the oldest xmin holder of this database (another session's transaction, a prepared transaction) has held it, s (0 when none)",
      registers,
      async collect() {
        const health = (await metrics.read())?.health;
        if (health) this.set(health.oldestXmin?.seconds ?? 0);
      },
    });
    new Gauge({
      name: "skipq_claim_index_pages_per_scan",
      help: "Index pages per scan of the claim index (jobs_pending_claim) between two reads of the metrics; a few when claims skip what they consumed",
      registers,
      async collect() {
        const health = (await metrics.read())?.health;
        if (health && health.claimIndexPagesPerScan !== null) this.set(health.claimIndexPagesPerScan);
      },
    });
    new Gauge({
      name: "skipq_jobs_table_dead_tuples",
      help: "Dead tuples on the jobs table as last reported by PostgreSQL's statistics",
      registers,
      async collect() {
        const health = (await metrics.read())?.health;
        if (health?.jobsTable) this.set(health.jobsTable.dead);
      },
    });
  }
}

/** A metrics set; see `MetricsOptions`. */
export function createMetrics(options?: MetricsOptions): SkipqMetrics {
  return new SkipqMetrics(options);
}
