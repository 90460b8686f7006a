/**
 * `skipq jobs`: lists jobs newest first, filtered by status, queue and kind.
 * Read-only; never selects whole payloads (only their size). Errors are
 * redacted at display time, whoever wrote them.
 */
import type { Command } from "commander";
import { closest } from "../../core/errors.js";
import { JOB_STATUSES, type JobStatus } from "../../ops/adminTypes.js";
import { displayError } from "../../ops/display.js";
import { firstLine, iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { CliError } from "../errors.js";
import { parseId, parseInteger, parseName } from "../parse.js";
import { print } from "../terminal.js";

interface JobsFlags {
  status?: string;
  queue?: string;
  kind?: string;
  limit: string;
  before?: string;
  json?: boolean;
}

/** A listed error (the first 200 characters, cut by the listing's SQL), redacted at display time. */
function shownError(text: string | null): string | null {
  return text === null ? null : displayError(text, undefined, text.length >= LISTED_ERROR_CHARS);
}
const LISTED_ERROR_CHARS = 200;

export function parseStatus(text: string): JobStatus {
  if ((JOB_STATUSES as readonly string[]).includes(text)) return text as JobStatus;
  const hint = closest(text, JOB_STATUSES);
  throw new CliError(
    `--status ${JSON.stringify(text)} is not a job status${hint ? ` (did you mean ${hint}?)` : ""}: use one of ${JOB_STATUSES.join(", ")}`,
  );
}

export function jobsCommand(program: Command): void {
  program
    .command("jobs")
    .description("list jobs, newest first")
    .option("-s, --status <status>", `only this status: ${JOB_STATUSES.join(", ")}`)
    .option("-q, --queue <name>", "only this queue")
    .option("-k, --kind <kind>", "only this kind")
    .option("-n, --limit <n>", "at most this many (1-1000)", "50")
    .option("--before <id>", "only jobs with a smaller id (to page through)")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .addHelpText(
      "after",
      `
Examples:
  $ skipq jobs --status dead --queue emails
  $ skipq jobs --limit 1000 --json | jq -r '.jobs[].id'`,
    )
    .action(async (flags: JobsFlags, command: Command) => {
      const status = flags.status === undefined ? undefined : parseStatus(flags.status);
      const limit = parseInteger("--limit", flags.limit, 1, 1000);
      const before = flags.before === undefined ? undefined : parseId(flags.before);
      if (flags.queue !== undefined) parseName("queue", flags.queue);
      if (flags.kind !== undefined) parseName("kind", flags.kind);
      await withSession(command, async ({ admin }) => {
        const jobs = await admin.listJobs({
          limit,
          ...(status ? { status } : {}),
          ...(flags.queue !== undefined ? { queue: flags.queue } : {}),
          ...(flags.kind !== undefined ? { kind: flags.kind } : {}),
          ...(before ? { before } : {}),
        });
        if (flags.json) {
          printJson({
            jobs: jobs.map((j) => ({
              id: j.id,
              queue: j.queue,
              kind: j.kind,
              status: j.status,
              priority: j.priority,
              attempts: j.attempts,
              maxAttempts: j.max_attempts,
              runAt: iso(j.run_at),
              lockedBy: j.locked_by,
              createdAt: iso(j.created_at),
              updatedAt: iso(j.updated_at),
              lastError: shownError(j.last_error),
              payloadBytes: Number(j.payload_bytes),
            })),
          });
          return;
        }
        if (jobs.length === 0) {
          print("no jobs match\n");
          return;
        }
        print(
          `${table(
            ["id", "queue", "kind", "status", "prio", "attempts", "run at", "last error"],
            jobs.map((j) => [
              j.id,
              j.queue,
              j.kind,
              j.status,
              j.priority,
              `${j.attempts}/${j.max_attempts}`,
              iso(j.run_at) ?? "",
              firstLine(shownError(j.last_error), 50),
            ]),
          )}\n`,
        );
        if (jobs.length === limit) {
          print(`showing ${limit}; older ones: --before ${jobs.at(-1)?.id}\n`);
        }
      });
    });
}
