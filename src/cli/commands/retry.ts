/**
 * `skipq retry <id>` puts one dead or cancelled job back to pending with fresh
 * attempts; `skipq retry --dead [--queue Q] [--fingerprint F]` does it for
 * every dead job (of a queue, of one error group). Touches only rows in those
 * states, so it never fights a worker over a running job.
 */
import type { Command } from "commander";
import { printJson, withSession } from "../context.js";
import { CliError } from "../errors.js";
import { parseId, parseName } from "../parse.js";
import { print } from "../terminal.js";

interface RetryFlags {
  dead?: boolean;
  queue?: string;
  fingerprint?: string;
  json?: boolean;
}

export function retryCommand(program: Command): void {
  program
    .command("retry")
    .description("put a dead or cancelled job back to pending, or every dead job with --dead")
    .argument("[id]", "the job's id")
    .option("--dead", "retry every dead job (of --queue, if given)")
    .option("-q, --queue <name>", "with --dead: only this queue")
    .option("--fingerprint <hex>", "with --dead: only dead jobs with this error fingerprint (see `skipq job <id>`)")
    .option("--json", 'print {"retried": n} as JSON')
    .addHelpText(
      "after",
      `
Examples:
  $ skipq retry 42
  $ skipq retry --dead --queue emails`,
    )
    .action(async (idText: string | undefined, flags: RetryFlags, command: Command) => {
      if (idText !== undefined && flags.dead) throw new CliError("pass either a job id or --dead, not both");
      if (idText === undefined && !flags.dead) {
        throw new CliError("say what to retry: a job id (skipq retry 42) or --dead for every dead job");
      }
      if (idText !== undefined && (flags.queue !== undefined || flags.fingerprint !== undefined)) {
        throw new CliError("--queue and --fingerprint go with --dead, not with a job id");
      }
      const id = idText === undefined ? undefined : parseId(idText);
      if (flags.queue !== undefined) parseName("queue", flags.queue);
      await withSession(command, async ({ admin }) => {
        let retried: number;
        if (id !== undefined) {
          await admin.retryJob(id);
          retried = 1;
        } else if (flags.fingerprint !== undefined) {
          retried = await admin.retryDeadByFingerprint(flags.fingerprint, flags.queue);
        } else {
          retried = await admin.retryDead(flags.queue);
        }
        if (flags.json) printJson({ retried });
        else if (id !== undefined) print(`job ${id} is pending again\n`);
        else print(`${retried} dead job${retried === 1 ? "" : "s"} pending again\n`);
      });
    });
}
