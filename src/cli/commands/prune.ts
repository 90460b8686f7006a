/**
 * `skipq prune --older-than 30d`: deletes finished jobs last updated longer
 * ago than that, in small batches (completed only, unless --status says more).
 * Never deletes pending or running jobs.
 */
import type { Command } from "commander";
import type { JobStatus } from "../../ops/adminTypes.js";
import { printJson, withSession } from "../context.js";
import { CliError } from "../errors.js";
import { parseDuration } from "../parse.js";
import { print } from "../terminal.js";

const PRUNABLE = ["completed", "dead", "cancelled"] as const;

export function pruneCommand(program: Command): void {
  program
    .command("prune")
    .description("delete finished jobs older than a duration")
    .requiredOption("--older-than <duration>", "age since the job last changed, e.g. 30d, 12h")
    .option("-s, --status <list>", `comma-separated: ${PRUNABLE.join(", ")}`, "completed")
    .option("--json", 'print {"deleted": n} as JSON')
    .addHelpText(
      "after",
      `
Examples:
  $ skipq prune --older-than 30d
  $ skipq prune --older-than 7d --status completed,cancelled,dead`,
    )
    .action(async (options: { olderThan: string; status: string; json?: boolean }, command: Command) => {
      const olderThanMs = parseDuration("--older-than", options.olderThan);
      const statuses = options.status.split(",").map((s) => s.trim());
      for (const s of statuses) {
        if (!(PRUNABLE as readonly string[]).includes(s)) {
          throw new CliError(`--status ${JSON.stringify(s)} cannot be pruned: use ${PRUNABLE.join(", ")}`);
        }
      }
      await withSession(command, async ({ admin }) => {
        const deleted = await admin.prune(olderThanMs, statuses as JobStatus[]);
        if (options.json) printJson({ deleted });
        else print(`deleted ${deleted} job${deleted === 1 ? "" : "s"} (${statuses.join(", ")})\n`);
      });
    });
}
