/**
 * The typed stores of the areas an operator reaches (admin, flow, cron, ops,
 * stats, replicas, workflows), all over one `Store`. Admin holds one over its
 * write store and one over its read store (a standby, when configured), so
 * which server a call goes to shows at the call: `reads.flow.queueGetLimits`,
 * `writes.admin.jobRetry`.
 */
import { AdminStore } from "./adminStore.js";
import { CronStore } from "./cronStore.js";
import { FlowStore } from "./flowStore.js";
import { OpsStore } from "./opsStore.js";
import { ReplicaStore } from "./replicaStore.js";
import { StatsStore } from "./statsStore.js";
import type { Store } from "./store.js";
import { WorkflowStore } from "./workflowStore.js";

export class AreaStores {
  readonly admin: AdminStore;
  readonly flow: FlowStore;
  readonly cron: CronStore;
  readonly ops: OpsStore;
  readonly stats: StatsStore;
  readonly replicas: ReplicaStore;
  readonly workflows: WorkflowStore;

  constructor(readonly store: Store) {
    this.admin = new AdminStore(store);
    this.flow = new FlowStore(store);
    this.cron = new CronStore(store);
    this.ops = new OpsStore(store);
    this.stats = new StatsStore(store);
    this.replicas = new ReplicaStore(store);
    this.workflows = new WorkflowStore(store);
  }
}
