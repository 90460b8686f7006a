/**
 * `skipq cancel <id>`: cancels a pending or running job. A running job's lease
 * is cleared, so its worker aborts at its next heartbeat and its outcome is
 * rejected. Other states are refused with the job's current status.
 */
import type { Command } from "commander";
import { printJson, withSession } from "../context.js";
import { parseId } from "../parse.js";
import { print } from "../terminal.js";

export function cancelCommand(program: Command): void {
  program
    .command("cancel")
    .description("cancel a pending or running job")
    .argument("<id>", "the job's id")
    .option("--json", 'print {"cancelled": id} as JSON')
    .addHelpText(
      "after",
      `
Example:
  $ skipq cancel 42`,
    )
    .action(async (idText: string, options: { json?: boolean }, command: Command) => {
      const id = parseId(idText);
      await withSession(command, async ({ admin }) => {
        await admin.cancelJob(id);
        if (options.json) printJson({ cancelled: id });
        else print(`job ${id} cancelled\n`);
      });
    });
}
