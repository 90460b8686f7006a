/**
 * `skipq cron list` and `skipq cron remove <name>`: the cron schedules that
 * Schedulers (in any process) declared, with their last and next tick.
 * Schedules are declared in code (`new Scheduler(skipq).add(...)`); the CLI
 * only shows them, and forgets one removed from the code.
 */
import type { Command } from "commander";
import { iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { parseName } from "../parse.js";
import { print } from "../terminal.js";

export function cronCommand(program: Command): void {
  const cron = program
    .command("cron")
    .description("list cron schedules (declared in code by a Scheduler), or forget one")
    .addHelpText(
      "after",
      `
Examples:
  $ skipq cron list
  $ skipq cron list --json
  $ skipq cron remove nightly-report`,
    );
  cron
    .command("list")
    .description("every schedule with its expression, time zone, last tick enqueued and next tick")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .action(async (options: { json?: boolean }, command: Command) => {
      await withSession(command, async ({ admin }) => {
        const schedules = await admin.cronSchedules();
        if (options.json) {
          printJson({
            schedules: schedules.map((s) => ({
              name: s.name,
              expression: s.expression,
              timezone: s.timezone,
              queue: s.queue,
              kind: s.kind,
              lastTick: iso(s.lastTick),
              lastJobId: s.lastJobId,
              nextTick: iso(s.nextTick),
            })),
          });
        } else if (schedules.length === 0) {
          print("no cron schedules: declare them in code with new Scheduler(skipq).add(...)\n");
        } else {
          print(
            `${table(
              ["name", "expression", "time zone", "queue", "kind", "last tick", "next tick"],
              schedules.map((s) => [
                s.name,
                s.expression,
                s.timezone ?? "UTC",
                s.queue,
                s.kind,
                iso(s.lastTick) ?? "",
                iso(s.nextTick) ?? "-",
              ]),
            )}\n`,
          );
        }
      });
    });
  cron
    .command("remove")
    .description("forget a schedule no longer declared in code (a Scheduler that declares it adds it back)")
    .argument("<name>", "schedule name")
    .action(async (name: string, _options: unknown, command: Command) => {
      parseName("kind", name);
      await withSession(command, async ({ admin }) => {
        const removed = await admin.removeCronSchedule(name);
        print(removed ? `cron schedule ${name} removed\n` : `no cron schedule named ${name}\n`);
      });
    });
}
