/**
 * The jobs explorer behind `Admin`: a filter validated into the parameters of
 * its statements (names, ids, a literal ILIKE pattern, a dotted payload path),
 * keyset pages of matching jobs, and bulk actions capped at BULK_MAX a kind.
 * It never loads payloads into a list. A bulk action that takes jobs out of
 * the live table (cancel, delete) resolves their dependents and settles their
 * waiters, like a single cancel.
 */
import { ValidationError } from "../core/errors.js";
import { assertId, assertInt, optionalName } from "../core/validate.js";
import type { AdminStore, JobFilterParams } from "../db/adminStore.js";
import { BULK_MAX } from "../db/sql/admin.js";
import {
  BULK_ACTIONS,
  type BulkAction,
  type BulkCounts,
  JOB_STATUSES,
  type JobFilter,
  type ListedJob,
} from "./adminTypes.js";

/** `%text%` for ILIKE, with the user's `\\`, `%` and `_` taken literally. */
export function likePattern(text: unknown): string {
  if (typeof text !== "string" || text.length > 200 || text.includes("\u0000"))
    throw new ValidationError("search must be a string of at most 200 characters");
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A dotted payload path: keys of letters, digits, "_" and "-", at most 10 deep. */
const PATH_KEY = /^[A-Za-z0-9_-]{1,100}$/;

/** The explorer's filter as the parameters of its statements, validated. */
function filterParams(f: JobFilter): JobFilterParams {
  if (f.status !== undefined && !JOB_STATUSES.includes(f.status))
    throw new ValidationError(`status ${JSON.stringify(f.status)} is not one of ${JOB_STATUSES.join(", ")}`);
  if (f.ids !== undefined && (!Array.isArray(f.ids) || f.ids.length > 1000))
    throw new ValidationError("ids must be an array of at most 1000 job ids");
  const date = (name: string, d: Date | undefined) => {
    if (d === undefined) return null;
    if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new ValidationError(`${name} must be a valid Date`);
    return d;
  };
  let contains: string | null = null;
  let exists: string | null = null;
  if (f.payloadPath !== undefined && f.payloadPath !== "") {
    const keys = f.payloadPath.split(".");
    if (keys.length > 10 || !keys.every((k) => PATH_KEY.test(k)))
      throw new ValidationError(
        `payload path ${JSON.stringify(f.payloadPath.slice(0, 50))} must be dotted keys of letters, digits, "_" and "-" (e.g. customer.id), at most 10 deep`,
      );
    if (f.payloadValue === undefined || f.payloadValue === "") {
      exists = `$${keys.map((k) => `."${k}"`).join("")}`;
    } else {
      if (f.payloadValue.length > 1000) throw new ValidationError("payload value must be at most 1000 characters");
      let value: unknown;
      try {
        value = JSON.parse(f.payloadValue);
      } catch {
        value = f.payloadValue;
      }
      contains = JSON.stringify(keys.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value));
    }
  } else if (f.payloadValue !== undefined && f.payloadValue !== "") {
    throw new ValidationError("a payload value needs a payload path (e.g. customer.id)");
  }
  return {
    status: f.status ?? null,
    queue: optionalName("queue", f.queue),
    kind: optionalName("kind", f.kind),
    ids: f.ids === undefined ? null : f.ids.map((id) => assertId(id)),
    errorLike: f.search === undefined || f.search === "" ? null : likePattern(f.search),
    createdFrom: date("createdFrom", f.createdFrom),
    createdTo: date("createdTo", f.createdTo),
    payloadContains: contains,
    payloadPathExists: exists,
  };
}

/** Jobs matching `filter`, newest first, a page at a time; see `Admin.searchJobs`. */
export async function searchJobs(
  admin: AdminStore,
  filter: JobFilter,
  page: { before?: string; limit?: number },
): Promise<ListedJob[]> {
  return admin.jobSearch({
    filter: filterParams(filter),
    before: page.before === undefined ? null : assertId(page.before),
    limit: assertInt("limit", page.limit ?? 50, 1, 500),
  });
}

/** How many jobs `filter` matches and how many each bulk action would touch; see `Admin.bulkCounts`. */
export async function bulkCounts(admin: AdminStore, filter: JobFilter): Promise<BulkCounts> {
  const r = await admin.jobBulkCount({ filter: filterParams(filter) });
  const cap = (n: number) => Math.min(n, BULK_MAX);
  return {
    matched: r.matched,
    limit: BULK_MAX,
    applicable: {
      retry: cap(r.retry),
      cancel: cap(r.cancel),
      delete: cap(r.delete),
      "run-now": cap(r.run_now),
      priority: cap(r.priority),
    },
  };
}

/** Applies a bulk action to the jobs of `filter`; see `Admin.bulk`. */
export async function bulk(
  admin: AdminStore,
  action: BulkAction,
  filter: JobFilter,
  options: { priority?: number },
): Promise<number> {
  const params = filterParams(filter);
  switch (action) {
    case "retry":
      return admin.jobBulkRetry({ filter: params });
    case "cancel":
      return admin.jobBulkCancel({ filter: params });
    case "delete":
      return bulkDelete(admin, params);
    case "run-now":
      return admin.jobBulkRunNow({ filter: params });
    case "priority": {
      const priority = assertInt("priority", options.priority, -32768, 32767);
      return admin.jobBulkPriority({ filter: params, priority });
    }
    default:
      throw new ValidationError(`action must be one of ${BULK_ACTIONS.join(", ")}`);
  }
}

/**
 * Bulk delete, one transaction: the jobs go (their dependents resolved as if they had been cancelled), then
 * what a deleted parent leaves open is settled — children under "wait" are cancelled, since nothing can
 * retry a deleted job (docs/workflows.md, "Deleting jobs").
 */
async function bulkDelete(admin: AdminStore, filter: JobFilterParams): Promise<number> {
  return admin.store.transaction(async (tx) => {
    const rows = await admin.jobBulkDelete({ filter }, tx);
    const live = rows.filter((r) => r.live).map((r) => r.id);
    if (live.length > 0) await admin.jobDeletedParentsResolve({ jobIds: live }, tx);
    return rows.length;
  });
}
