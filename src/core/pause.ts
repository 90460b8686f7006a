/**
 * "Pause this key until T" as callers give it — a Date (compared with the
 * database clock) or a duration from the database's now — checked once for
 * both edges that take it: `Admin.pauseKey` and a handler's `ctx.pauseKey`.
 */
import { assertDate, type Duration, toMs } from "./validate.js";

export type PauseTarget = { at: Date } | { ms: number };

export function pauseTarget(until: Date | Duration): PauseTarget {
  return until instanceof Date
    ? { at: assertDate("until", until) }
    : { ms: toMs("until", until, { allowZero: false }) };
}
