/**
 * Cron schedules from a tasks module's named export `cron`, for
 * `skipq worker --tasks`: an array of `{ expression, kind, payload?, options? }`.
 * Invariant: every entry is checked (shape, expression, time zone, names,
 * payload) before the worker connects; a bad one is a `CliError` naming it.
 */

import { type CronOptions, Scheduler } from "../cron/scheduler.js";
import type { Skipq } from "../skipq.js";
import { CliError } from "./errors.js";

const SHAPE =
  'export const cron = [{ expression: "0 * * * *", kind: "hourly-report", payload: {}, options: { timezone: "UTC" } }]';

/** A Scheduler with the module's schedules, or undefined when it exports none. */
export function schedulerFromTasks(skipq: Skipq, cron: unknown, file: string): Scheduler | undefined {
  if (cron === undefined) return undefined;
  if (!Array.isArray(cron))
    throw new CliError(`tasks module ${file}: its \`cron\` export must be an array, e.g. ${SHAPE}`);
  const scheduler = new Scheduler(skipq);
  cron.forEach((entry, i) => {
    const e = entry as { expression?: unknown; kind?: unknown; payload?: unknown; options?: unknown };
    if (typeof e !== "object" || e === null || typeof e.expression !== "string" || typeof e.kind !== "string") {
      throw new CliError(`tasks module ${file}: cron[${i}] needs a string expression and kind, e.g. ${SHAPE}`);
    }
    try {
      scheduler.add(e.expression, e.kind, e.payload ?? {}, (e.options ?? {}) as CronOptions);
    } catch (error) {
      throw new CliError(`tasks module ${file}: cron[${i}] (${e.kind}): ${(error as Error).message}`);
    }
  });
  return cron.length > 0 ? scheduler : undefined;
}
