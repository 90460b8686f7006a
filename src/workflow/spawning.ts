/**
 * Workflow spawns from inside a handler (`ctx.spawn`): children and their
 * continuation prepared as rows through the client's enqueuer, and a success
 * that spawns completed in the same transaction that inserts its children, so
 * a lost lease leaves neither. It never inserts without the job's lease.
 */
import type pg from "pg";
import { ValidationError } from "../core/errors.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { InsertRow, JobStore } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";
import { withTransaction } from "../db/transaction.js";
import type { BulkItem, Enqueuer } from "../enqueue/enqueuer.js";

/** The enqueuer ctx.spawn uses (the client's); read when a handler spawns. */
export type EnqueuerOf = () => Enqueuer | undefined;

/** Workflows: the enqueuer ctx.spawn uses (the client's). */
function spawner(enqueuer: EnqueuerOf): Enqueuer {
  const e = enqueuer();
  if (!e)
    throw new ValidationError("ctx.spawn needs a worker made by skipq.worker() (its client enqueues the children)");
  return e;
}

/** The rows of `children` and, depending on all of them, `then`. */
export function prepareSpawn(
  enqueuer: EnqueuerOf,
  children: ReadonlyArray<BulkItem>,
  then: BulkItem | undefined,
): Promise<InsertRow[]> {
  if (!Array.isArray(children)) throw new TypeError("ctx.spawn expects an array of { job, payload, ...options }");
  const items: BulkItem[] = [...children];
  if (then !== undefined) {
    // No children: the continuation depends on nothing more than it says (and may run at once).
    const dependsOn = [...(then.dependsOn ?? []), ...children.map((_, item) => ({ item }))];
    items.push(dependsOn.length > 0 ? { ...then, dependsOn } : then);
  }
  return spawner(enqueuer).prepareMany(items, {});
}

/** The rows of several ctx.spawn calls as one call's rows: positions and { item } refs shifted. */
export function spawnedRows(spawns: ReadonlyArray<InsertRow[]>): InsertRow[] {
  const rows: InsertRow[] = [];
  for (const group of spawns) {
    const at = rows.length;
    for (const r of group)
      rows.push({
        ...r,
        i: r.i + at,
        parents: r.parents && { ...r.parents, items: r.parents.items.map((i) => i + at) },
      });
  }
  return rows;
}

/** ctx.completeTx: a completed job's spawned rows, inserted in the caller's transaction `tx`. */
export async function insertSpawned(enqueuer: EnqueuerOf, tx: Queryable, rows: InsertRow[]): Promise<void> {
  await spawner(enqueuer).withParents(tx, rows, true);
}

/** Completes a spawning job and inserts its children in one transaction; false when its lease was lost. */
export function completeSpawning(
  o: { pool: pg.Pool; jobs: JobStore; features: JobFeatureStore; enqueuer: EnqueuerOf },
  id: string,
  lease: string,
  result: string | null,
  rows: InsertRow[],
): Promise<boolean> {
  const { pool, jobs, features } = o;
  return withTransaction(pool, async (tx) => {
    const accepted =
      result === null
        ? await jobs.completeMany([id], [lease], tx)
        : await features.completeManyWithResults([id], [lease], [result], tx);
    if (accepted.length === 0) return false;
    await spawner(o.enqueuer).withParents(tx, rows, true);
    return true;
  });
}
