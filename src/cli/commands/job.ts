/**
 * `skipq job <id>`: everything about one job, its payload, full last
 * error and every attempt (newest first) included. An unknown id exits 1. Read-only. Error text (last_error
 * and each attempt's) is redacted at display time, whoever wrote it; values
 * of any shape and depth are printed (attempt_logs that is not a list as its
 * JSON); nothing from the row reaches the terminal raw (terminal.ts).
 */
import type { Command } from "commander";
import type { JobRow } from "../../ops/adminTypes.js";
import { defaultRedactor, redactKeys } from "../../ops/dashboard/redact.js";
import {
  attemptLogsText,
  attemptRows,
  displayJson,
  errorRedactorFor,
  loggedAttempts,
  MAX_ATTEMPTS_KEPT,
} from "../../ops/display.js";
import { firstLine, iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { CliError, EXIT_FAILURE } from "../errors.js";
import { parseId } from "../parse.js";
import { print } from "../terminal.js";

/** The stable JSON shape of one job (docs/cli.md). */
export function jobJson(job: JobRow) {
  return {
    id: job.id,
    queue: job.queue,
    kind: job.kind,
    status: job.status,
    priority: job.priority,
    attempts: job.attempts,
    maxAttempts: job.max_attempts,
    runAt: iso(job.run_at),
    lockedAt: iso(job.locked_at),
    lockedBy: job.locked_by,
    leaseExpiresAt: iso(job.lease_expires_at),
    idempotencyKey: job.idempotency_key,
    lastError: job.last_error === null ? null : errorRedactorFor(job)(job.last_error),
    errorFingerprint: job.error_fingerprint,
    completedAt: iso(job.completed_at),
    createdAt: iso(job.created_at),
    updatedAt: iso(job.updated_at),
    headers: (job as JobRow & { headers?: Record<string, string> | null }).headers ?? {},
    dependsOn: job.dependsOn ?? [],
    waitingOn: job.waitingOn ?? [],
    payload: job.payload,
    /** What the handler returned; null when nothing (docs/jobs.md). */
    result: job.result ?? null,
    progress: job.progress ?? null,
    /**
     * The most recent attempts (every one but plain successes) with their ctx.log lines, oldest first, as
     * stored (any shape), with values under secret-looking keys hidden and every text redacted like lastError.
     */
    attemptLogs: defaultRedactor(job.attempt_logs ?? [], { field: "logs", job }),
  };
}

const keys = redactKeys();

export function jobCommand(program: Command): void {
  program
    .command("job")
    .description("show one job: every field, its payload, result, progress, last error, attempts and attempt logs")
    .argument("<id>", "the job's id")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .addHelpText(
      "after",
      `
Examples:
  $ skipq job 42
  $ skipq job 42 --json | jq -r .lastError
  $ skipq job 42 --json | jq .result`,
    )
    .action(async (idText: string, options: { json?: boolean }, command: Command) => {
      const id = parseId(idText);
      await withSession(command, async ({ admin, config }) => {
        const job = await admin.getJob(id);
        if (!job) {
          throw new CliError(
            `job ${id} does not exist in schema "${config.schema}": list jobs with \`skipq jobs\``,
            EXIT_FAILURE,
          );
        }
        const data = jobJson(job);
        if (options.json) {
          printJson(data);
          return;
        }
        const { payload, lastError, result, attemptLogs: _logs, ...fields } = data;
        const rows = Object.entries(fields).map(([name, value]): [string, string] => [
          name,
          value === null ? "-" : typeof value === "object" ? displayJson(value) : String(value),
        ]);
        const redaction = {
          keys: (value: unknown) => keys(value, { field: "logs", job }),
          text: errorRedactorFor(job),
        };
        const logs = attemptLogsText(loggedAttempts(job.attempt_logs), redaction);
        const attempts = attemptRows(job, redaction);
        print(`${table(["field", "value"], rows)}\n`);
        print(`payload:\n${displayJson(payload, { indent: 2 })}\n`);
        print(`result:\n${result === null ? "-" : displayJson(result, { indent: 2 })}\n`);
        print(`last error:\n${lastError ?? "-"}\n`);
        if (attempts.rows.length > 0) {
          const cells = attempts.rows.map((a) => [
            a.attempt,
            a.startedAt ?? "-",
            a.endedAt ?? "-",
            a.worker,
            a.outcome,
            a.error === null ? "-" : firstLine(a.error, 80),
          ]);
          print(
            `attempts (newest first):\n${table(["attempt", "started", "ended", "worker", "outcome", "error"], cells)}\n`,
          );
        }
        if (attempts.unrecorded > 0)
          print(
            `${attempts.unrecorded} attempt(s) have no record (run before attempts were recorded, by the SQL protocol, or older than the ${MAX_ATTEMPTS_KEPT} kept)\n`,
          );
        if (logs.length > 0) print(`attempt logs:\n${logs.join("\n")}\n`);
      });
    });
}
