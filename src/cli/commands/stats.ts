/**
 * `skipq stats`: per queue, jobs by status, how long the oldest runnable job
 * has waited, and whether the queue is paused. Read-only.
 */
import type { Command } from "commander";
import { formatAge, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { print } from "../terminal.js";

export function statsCommand(program: Command): void {
  program
    .command("stats")
    .description("counts by queue and status, oldest pending age, paused queues")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .addHelpText(
      "after",
      `
"pending" counts the jobs runnable now; "scheduled" the pending ones not due yet.
Health warnings (see ${shippedDoc("metrics.md#health")}) are printed first, and
under "health" in --json, then the oldest snapshot held for 10 s or more (a session,
a prepared transaction or a replication slot: vacuum can remove nothing newer)
with the jobs table's dead tuples ("oldestXmin" and "jobsTable" in --json).

Examples:
  $ skipq stats
  $ skipq stats --json | jq '.queues[] | select(.dead > 0)'`,
    )
    .action(async (options: { json?: boolean }, command: Command) => {
      await withSession(command, async ({ admin, config }) => {
        const [stats, settings, health] = await Promise.all([admin.stats(), admin.listQueueSettings(), admin.health()]);
        const paused = new Set(settings.filter((s) => s.paused).map((s) => s.name));
        // Paused queues with no jobs still deserve a row: an operator paused them on purpose.
        const names = new Set(stats.map((s) => s.queue));
        const rows = [
          ...stats,
          ...[...paused]
            .filter((name) => !names.has(name))
            .map((queue) => ({
              queue,
              pending: 0,
              scheduled: 0,
              waiting: 0,
              running: 0,
              completed: 0,
              dead: 0,
              cancelled: 0,
              oldestPendingSeconds: null,
            })),
        ].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
        if (options.json) {
          printJson({
            schema: config.schema,
            queues: rows.map((r) => ({
              queue: r.queue,
              paused: paused.has(r.queue),
              pending: r.pending,
              scheduled: r.scheduled,
              waiting: r.waiting,
              running: r.running,
              completed: r.completed,
              dead: r.dead,
              cancelled: r.cancelled,
              oldestPendingSeconds:
                r.oldestPendingSeconds === null ? null : Math.round(r.oldestPendingSeconds * 1000) / 1000,
            })),
            health: health.warnings.map((w) => ({ check: w.check, message: w.message })),
            oldestXmin: health.oldestXmin,
            jobsTable: health.jobsTable,
          });
          return;
        }
        // Health warnings (vacuum held back, dead tuples, kinds no worker handles) go first: they explain the numbers.
        for (const w of health.warnings) print(`warning (${w.check}): ${w.message}\n`);
        // What could slow claims before it does: the oldest snapshot held, and the jobs table's dead tuples.
        const x = health.oldestXmin;
        if (x && (x.seconds === null || x.seconds >= 10))
          print(
            `oldest snapshot: ${x.holder}, ${x.ageTransactions} transactions${x.seconds === null ? "" : `, ${x.seconds} s`}${health.jobsTable ? `; jobs table: ${health.jobsTable.dead} dead / ${health.jobsTable.live} live tuples` : ""}\n`,
          );
        if (rows.length === 0) {
          print(`no jobs in schema "${config.schema}" yet; add one with \`skipq enqueue <kind>\`\n`);
          return;
        }
        print(
          `${table(
            ["queue", "pending", "scheduled", "waiting", "running", "completed", "dead", "cancelled", "oldest pending"],
            rows.map((r) => [
              paused.has(r.queue) ? `${r.queue} (paused)` : r.queue,
              r.pending,
              r.scheduled,
              r.waiting,
              r.running,
              r.completed,
              r.dead,
              r.cancelled,
              formatAge(r.oldestPendingSeconds),
            ]),
            ["left", "right", "right", "right", "right", "right", "right", "right", "right"],
          )}\n`,
        );
      });
    });
}
