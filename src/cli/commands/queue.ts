/**
 * `skipq queue pause|resume <name>` and `skipq queue list`: flow control per
 * queue. A pause stops new claims at every worker's next claim; running jobs
 * finish. Resuming an unpaused queue is a no-op.
 */
import type { Command } from "commander";
import { iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { parseName } from "../parse.js";
import { print } from "../terminal.js";

export function queueCommand(program: Command): void {
  const queue = program
    .command("queue")
    .description("pause, resume or list queues")
    .addHelpText(
      "after",
      `
Examples:
  $ skipq queue pause emails
  $ skipq queue resume emails
  $ skipq queue list --json`,
    );
  queue
    .command("pause")
    .description("stop workers claiming from a queue (running jobs finish)")
    .argument("<name>", "queue name")
    .option("--json", 'print {"queue","paused"} as JSON')
    .action(async (name: string, options: { json?: boolean }, command: Command) => {
      parseName("queue", name);
      await withSession(command, async ({ admin }) => {
        await admin.pauseQueue(name);
        if (options.json) printJson({ queue: name, paused: true });
        else print(`queue ${name} paused\n`);
      });
    });
  queue
    .command("resume")
    .description("let workers claim from a paused queue again")
    .argument("<name>", "queue name")
    .option("--json", 'print {"queue","paused"} as JSON')
    .action(async (name: string, options: { json?: boolean }, command: Command) => {
      parseName("queue", name);
      await withSession(command, async ({ admin }) => {
        await admin.resumeQueue(name);
        if (options.json) printJson({ queue: name, paused: false });
        else print(`queue ${name} resumed\n`);
      });
    });
  queue
    .command("list")
    .description("queues with settings, and whether each is paused")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .action(async (options: { json?: boolean }, command: Command) => {
      await withSession(command, async ({ admin }) => {
        const queues = await admin.listQueueSettings();
        if (options.json) {
          printJson({ queues: queues.map((q) => ({ queue: q.name, paused: q.paused, pausedAt: iso(q.pausedAt) })) });
        } else if (queues.length === 0) {
          print("no queue has settings yet (every queue is running)\n");
        } else {
          print(
            `${table(
              ["queue", "paused since"],
              queues.map((q) => [q.name, q.paused ? (iso(q.pausedAt) ?? "") : "-"]),
            )}\n`,
          );
        }
      });
    });
}
