/**
 * skipq: a durable job queue for Node.js that lives inside PostgreSQL.
 * This is the only public entry point; everything else is internal.
 */

export { type DrizzleLike, type DrizzleSqlLike, drizzleQueryable } from "./adapters/drizzle.js";
export { type KnexLike, knexQueryable } from "./adapters/knex.js";
export { type KyselyLike, kyselyQueryable } from "./adapters/kysely.js";
export { type PostgresJsLike, postgresJsQueryable } from "./adapters/postgresjs.js";
export { type PrismaLike, prismaQueryable } from "./adapters/prisma.js";
export { type BackoffOptions, backoffBaseMs, backoffMs, defaultBackoff } from "./core/backoff.js";
export { errorFingerprint, formatError } from "./core/errorFormat.js";
export {
  AlreadyCompletedError,
  CancelJob,
  FailPermanently,
  LeaseLostError,
  MigrationError,
  PayloadInvalidError,
  PayloadNotJsonError,
  PayloadTooLargeError,
  PoolTooSmallError,
  ResultNotJsonError,
  ResultTooLargeError,
  RetryIn,
  SchemaNotMigratedError,
  SchemaTooNewError,
  SkipqError,
  type SkipqErrorCode,
  UnknownKindError,
  ValidationError,
  WaitTimeoutError,
} from "./core/errors.js";
export { defineJob, type JobDefaults, type JobDefinition, type PayloadOf, type ResultOf } from "./core/job.js";
export { defaultLogger, type Logger, silentLogger } from "./core/logger.js";
export { defaultErrorRedactor, type ErrorRedactor } from "./core/secrets.js";
export type { Duration } from "./core/validate.js";
export {
  type CronOptions,
  type CronTickResult,
  parseCron,
  Scheduler,
  type SchedulerOptions,
} from "./cron/scheduler.js";
export { latestVersion, type MigrateResult } from "./db/migrate.js";
export type { LocalService, MaintenanceOptions } from "./maintenance/maintainer.js";
export {
  type PruneResult,
  Pruner,
  type PrunerOptions,
  type PurposeResult,
  RetentionError,
  type RetentionPurpose,
} from "./maintenance/pruner.js";
export { Admin } from "./ops/admin.js";
export {
  type AttemptLog,
  BULK_ACTIONS,
  type BulkAction,
  type BulkCounts,
  type CronScheduleRow,
  type DeadGroup,
  type FlowNode,
  JOB_STATUSES,
  type JobFilter,
  type JobFlow,
  type JobRow,
  type JobStatus,
  type ListOptions,
  type QueueLimits,
  type QueueOverview,
  type QueueSettings,
  type QueueStats,
  type ReplicaStatus,
  STATS_RANGES,
  type StatsPoint,
  type StatsRange,
  type WorkerPresence,
} from "./ops/adminTypes.js";
export {
  createDashboard,
  type Dashboard,
  type DashboardAuth,
  type DashboardHandler,
  type DashboardOptions,
  defaultRedactor,
  escapeHtml,
  type FetchContext,
  type FetchHandler,
  type Redactor,
  type RedactTarget,
  type RunningDashboard,
  redactKeys,
  SECRET_KEY_PATTERN,
  type StartDashboardOptions,
  startDashboard,
} from "./ops/dashboard/index.js";
export {
  HEALTH_CHECKS,
  type HealthCheck,
  type HealthOptions,
  type HealthReport,
  type HealthWarning,
} from "./ops/health.js";
export { type CreateLoggerOptions, createLogger } from "./ops/logging.js";
export { createMetrics, type MetricsOptions, SkipqMetrics } from "./ops/metrics.js";
export { type MetricsServer, type ServeMetricsOptions, serveMetrics } from "./ops/metricsServer.js";
export {
  type BatchOutcome,
  Outbox,
  type OutboxEvent,
  OutboxRelay,
  type OutboxSink,
  type PublishOptions,
  type RelayEvents,
  type RelayOptions,
} from "./outbox/outbox.js";
export { type NatsSinkOptions, natsSink } from "./outbox/sinks/nats.js";
export { type RabbitmqSinkOptions, rabbitmqSink } from "./outbox/sinks/rabbitmq.js";
export {
  SIGNATURE_HEADER,
  signWebhook,
  TIMESTAMP_HEADER,
  verifyWebhook,
  type WebhookSinkOptions,
  webhookSink,
} from "./outbox/sinks/webhook.js";
export {
  defineSaga,
  getSaga,
  type SagaContext,
  type SagaDefinition,
  type SagaOptions,
  type SagaState,
  type SagaStatus,
  type SagaStep,
  type SagaStepStatus,
} from "./saga/define.js";
export { Sagas } from "./saga/sagas.js";
export {
  type BatchResult,
  type BatchStatus,
  type BulkItem,
  type CheckedItem,
  type CheckedItems,
  type EnqueueCall,
  type EnqueueMiddleware,
  type EnqueueOptions,
  type EnqueueResult,
  type FinishedStatus,
  type JobRef,
  type Queryable,
  Skipq,
  type SkipqOptions,
  type WaitOptions,
  type WaitResult,
} from "./skipq.js";
export type { ClaimInfo } from "./worker/worker.js";
export {
  type BatchContext,
  type BatchHandler,
  type BatchHandlerOptions,
  type BatchJob,
  type Handler,
  type Job,
  type JobContext,
  type Outcome,
  type ParentOutcome,
  Worker,
  type WorkerEvents,
  type WorkerMiddleware,
  type WorkerOptions,
  type WorkerStats,
} from "./worker/worker.js";
export type { BatchOptions, ParentFailurePolicy, ParentRef } from "./workflow/graph.js";
