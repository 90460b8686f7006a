/**
 * Workflows at enqueue: validates `dependsOn` / `onParentFailure` and inserts
 * jobs that wait for others. A dependent job is inserted 'waiting' and linked
 * to its parents in the same transaction (skipq_link, migration 0013), which
 * counts the parents still to finish and resolves the ones already finished;
 * from then on the outcome statements of its parents decide when it runs.
 *
 * Invariants: unknown parents and cycles (only possible between rows of one
 * call, which may name each other as `{ item: i }`) are ValidationErrors
 * raised before any row is written; live parents are locked (FOR KEY SHARE)
 * from the check until the commit, so none finishes unseen.
 */

import { ValidationError } from "../core/errors.js";
import { isId } from "../core/validate.js";
import type { InsertRow, JobStore, ParentRefs } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";

/** What a dependent job does when a parent dies or is cancelled. */
export type ParentFailurePolicy = "cancel" | "run" | "wait";

/** A parent: an existing job's id, or (in `enqueueMany`, `ctx.spawn` and `batch`) another item of the same call. */
export type ParentRef = string | number | bigint | { item: number };

/** Most parents one job may wait for. */
export const MAX_PARENTS = 100_000;

const POLICIES: readonly ParentFailurePolicy[] = ["cancel", "run", "wait"];

/**
 * Validates a call's dependsOn and onParentFailure. `items`: how many rows the call inserts (refs by item
 * are allowed only then), `self`: this row's position.
 */
export function parentRefs(
  options: { dependsOn?: readonly ParentRef[]; onParentFailure?: ParentFailurePolicy },
  self: number,
  items: number | undefined,
): ParentRefs | null {
  const { dependsOn, onParentFailure } = options;
  if (onParentFailure !== undefined && !POLICIES.includes(onParentFailure)) {
    throw new ValidationError(
      `onParentFailure must be "cancel", "run" or "wait", got ${JSON.stringify(onParentFailure)}`,
    );
  }
  if (dependsOn === undefined) {
    if (onParentFailure !== undefined) throw new ValidationError("onParentFailure needs dependsOn: [parent ids]");
    return null;
  }
  if (!Array.isArray(dependsOn) || dependsOn.length === 0 || dependsOn.length > MAX_PARENTS) {
    throw new ValidationError(`dependsOn must be an array of 1 to ${MAX_PARENTS} job ids`);
  }
  const ids = new Set<string>();
  const refs = new Set<number>();
  for (const ref of dependsOn as unknown[]) {
    if (typeof ref === "object" && ref !== null && "item" in ref) {
      const item = (ref as { item: unknown }).item;
      if (items === undefined) {
        throw new ValidationError("dependsOn: { item } refers to another job of the same call; use it in enqueueMany");
      }
      if (typeof item !== "number" || !Number.isInteger(item) || item < 0 || item >= items) {
        throw new ValidationError(
          `dependsOn: { item: ${String(item)} } is not a position of this call (0-${items - 1})`,
        );
      }
      if (item === self) throw new ValidationError(`dependsOn: item ${self} depends on itself (a cycle)`);
      refs.add(item);
      continue;
    }
    const id = typeof ref === "string" ? ref : typeof ref === "number" || typeof ref === "bigint" ? String(ref) : "";
    if (!isId(id)) {
      throw new ValidationError(`dependsOn: ${JSON.stringify(String(ref))} is not a job id (a positive integer)`);
    }
    ids.add(id);
  }
  return { ids: [...ids], items: [...refs], policy: onParentFailure ?? "cancel" };
}

/** Throws a ValidationError naming a cycle among the rows' `{ item }` references, if there is one. */
export function assertAcyclic(rows: readonly InsertRow[]): void {
  // Kahn's algorithm over the item edges: whatever cannot be ordered is on (or behind) a cycle.
  const waiting = rows.map((r) => r.parents?.items.length ?? 0);
  const children = new Map<number, number[]>();
  for (const r of rows) for (const p of r.parents?.items ?? []) children.set(p, [...(children.get(p) ?? []), r.i]);
  const ready = rows.filter((r) => waiting[r.i] === 0).map((r) => r.i);
  let ordered = 0;
  while (ready.length > 0) {
    const i = ready.pop() as number;
    ordered++;
    for (const c of children.get(i) ?? []) if (--(waiting[c] as number) === 0) ready.push(c);
  }
  if (ordered < rows.length) {
    const stuck = rows.filter((r) => (waiting[r.i] as number) > 0).map((r) => r.i);
    throw new ValidationError(
      `dependsOn: items ${stuck.slice(0, 10).join(", ")} form a cycle (a job would wait for itself); nothing was enqueued`,
    );
  }
}

/** Row results as the plain insert path returns them. */
type Inserted = Array<{ id: string; created: boolean }>;

/**
 * Inserts `rows` (positions 0..n-1, some with parents) inside transaction `db`: parents checked and locked,
 * plain rows through `insertPlain`, dependent rows waiting, then linked. Results in input order.
 */
export async function insertWithParents(
  jobs: JobStore,
  db: Queryable,
  rows: readonly InsertRow[],
  insertPlain: (db: Queryable, rows: InsertRow[]) => Promise<Inserted>,
  chunk: number,
): Promise<Inserted> {
  assertAcyclic(rows);
  const external = [...new Set(rows.flatMap((r) => r.parents?.ids ?? []))];
  if (external.length > 0) {
    const found = await jobs.parentsLock(db, external);
    const missing = external.filter((id) => !found.has(id));
    if (missing.length > 0) {
      throw new ValidationError(
        `dependsOn: no job ${missing.slice(0, 10).join(", ")}${missing.length > 10 ? ", …" : ""} (a parent must exist, live or in history, when its dependent is enqueued); nothing was enqueued`,
      );
    }
  }
  const results: Inserted = new Array(rows.length);
  const plain = rows.filter((r) => r.parents === null);
  if (plain.length > 0) {
    const inserted = await insertPlain(
      db,
      plain.map((r, k) => ({ ...r, i: k })),
    );
    for (const [k, r] of plain.entries()) results[r.i] = inserted[k] as Inserted[number];
  }
  const dependent = rows.filter((r) => r.parents !== null);
  for (let start = 0; start < dependent.length; start += chunk) {
    const part = dependent.slice(start, start + chunk);
    const inserted = await jobs.insertWaiting(db, part);
    for (const [k, r] of part.entries()) {
      const row = inserted[k] as Inserted[number];
      // A taken idempotency key: the job holding it is the result (its id, not the one drawn for this row).
      results[r.i] = row.created
        ? row
        : { id: (await jobs.findByKey(db, r.queue, r.key as string)) as string, created: false };
    }
  }
  const children: string[] = [];
  const parents: string[] = [];
  for (const r of dependent) {
    const row = results[r.i] as Inserted[number];
    if (!row.created) continue; // an idempotency key returned an existing job: its dependencies stand
    const refs = r.parents as ParentRefs;
    for (const p of new Set([...refs.ids, ...refs.items.map((i) => (results[i] as Inserted[number]).id)])) {
      children.push(row.id);
      parents.push(p);
    }
  }
  if (children.length > 0) {
    try {
      await jobs.link(db, children, parents);
    } catch (error) {
      // A parent pruned between the check and the link (the statement names it).
      if ((error as { code?: string }).code === "23503") throw new ValidationError((error as Error).message);
      throw error;
    }
  }
  return results;
}

/** Workflows: a batch's callbacks. Each depends on every job of the batch. */
export interface BatchOptions<Item> {
  /** Runs once every job of the batch finished, however it ended (onParentFailure "run"). */
  onComplete?: Item;
  /** Runs once every job of the batch completed; cancelled if one dies or is cancelled. */
  onSuccess?: Item;
}

/** The items a batch inserts: its jobs, then onComplete and onSuccess (when given), each depending on all jobs. */
export function batchItems<Item extends { dependsOn?: readonly ParentRef[]; onParentFailure?: ParentFailurePolicy }>(
  jobs: readonly Item[],
  options: BatchOptions<Item>,
): Item[] {
  if (!Array.isArray(jobs) || jobs.length === 0) {
    throw new ValidationError("batch needs an array of at least one { job, payload, ...options }");
  }
  if (typeof options !== "object" || options === null) throw new ValidationError("batch options must be an object");
  const all = jobs.map((_, item) => ({ item }));
  const callback = (item: Item | undefined, policy: ParentFailurePolicy): Item[] => {
    if (item === undefined) return [];
    if (item.onParentFailure !== undefined) {
      throw new ValidationError("a batch callback's onParentFailure is fixed (onComplete: run, onSuccess: cancel)");
    }
    return [{ ...item, dependsOn: [...(item.dependsOn ?? []), ...all], onParentFailure: policy }];
  };
  return [...jobs, ...callback(options.onComplete, "run"), ...callback(options.onSuccess, "cancel")];
}
