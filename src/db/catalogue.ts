/**
 * Every statement skipq runs against a schema, by area, built once per
 * schema name and shared by every store of that schema. A new statement goes
 * into the area module under sql/ (noun-first name, a why-comment), and is
 * reached as `store.sql.<area>.<name>`.
 */
import type { Schema } from "./schema.js";
import { adminStatements } from "./sql/admin.js";
import { dashboardStatements } from "./sql/dashboard.js";
import { flowStatements } from "./sql/flow.js";
import { historyStatements } from "./sql/history.js";
import { jobFeatureStatements } from "./sql/jobFeatures.js";
import { jobStatements } from "./sql/jobs.js";
import { maintenanceStatements } from "./sql/maintenance.js";
import { migrationStatements } from "./sql/migrations.js";
import { opsStatements } from "./sql/ops.js";
import { outboxStatements } from "./sql/outbox.js";
import { replicaStatements } from "./sql/replicas.js";
import { sagaStatements } from "./sql/sagas.js";
import { schedulerStatements } from "./sql/scheduler.js";
import { statsStatements } from "./sql/stats.js";
import { wakeupStatements } from "./sql/wakeups.js";
import { workflowStatements } from "./sql/workflows.js";

function build(schema: Schema) {
  return {
    /** The claim path: claim, complete, settle, heartbeat, insert. */
    jobs: jobStatements(schema),
    /** Results, progress, attempt logs, waiting, uniqueness windows, debounce (docs/jobs.md). */
    features: jobFeatureStatements(schema),
    /** When the fetch loop wakes: the next due time of its queues. */
    wakeups: wakeupStatements(schema),
    /** Limits, key pauses and the limited claim's settings. */
    flow: flowStatements(schema),
    /** Reaper and leader lease. */
    maintenance: maintenanceStatements(schema),
    /** History partitions, retention, keys, the upgrade's move of finished rows. */
    history: historyStatements(schema),
    /** Operator actions and listings. */
    admin: adminStatements(schema),
    /** Presence, overview, throughput, health. */
    ops: opsStatements(schema),
    cron: schedulerStatements(schema),
    outbox: outboxStatements(schema),
    /** Per-queue statistics by the minute: the maintainer's rollup, the dashboard's charts. */
    stats: statsStatements(schema),
    /** Read replicas: the read server's lag behind the primary. */
    replicas: replicaStatements(schema),
    /** Dashboard sessions. */
    dashboard: dashboardStatements(schema),
    sagas: sagaStatements(schema),
    /** Dependencies between jobs (dependsOn, spawn, batches). */
    workflows: workflowStatements(schema),
    migrations: migrationStatements(schema),
  };
}

export type Catalogue = ReturnType<typeof build>;

const built = new Map<string, Catalogue>();

/** The catalogue of `schema`, built on first use. */
export function catalogue(schema: Schema): Catalogue {
  let sql = built.get(schema.name);
  if (!sql) {
    sql = build(schema);
    built.set(schema.name, sql);
  }
  return sql;
}
