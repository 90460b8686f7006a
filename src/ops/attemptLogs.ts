/**
 * Attempt logs as text, for people: the CLI's `skipq job <id>` and the
 * dashboard's job page print the same lines.
 */
import type { AttemptLog } from "./adminTypes.js";

/** One attempt's log as text: a header line (attempt, worker, times, outcome), its lines, its error. */
export function attemptLogText(log: AttemptLog): string {
  const head = `attempt ${log.attempt} on ${log.worker}, ${log.startedAt} → ${log.endedAt}: ${log.outcome}`;
  const lines = log.lines.map(({ at, level, msg, ...fields }) => {
    const extra = Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields)}` : "";
    return `  ${at} ${level.padEnd(5)} ${msg}${extra}`;
  });
  if (log.dropped > 0) lines.push(`  … ${log.dropped} more line(s) not kept`);
  if (log.error) lines.push(`  error: ${log.error.split("\n").join("\n         ")}`);
  return [head, ...lines].join("\n");
}
