/**
 * The `skipq` command line: builds the commander program and runs it.
 * Each command lives in its own file under `commands/` and is registered from
 * the list below, so adding one is a new file plus one line here.
 * Invariants: every failure is one line on stderr and a non-zero exit code
 * (2 for bad input, 1 otherwise); unknown commands and flags suggest the
 * closest; output goes to stdout only on success. It never calls
 * `process.exit` itself: `main` returns the exit code to bin/skipq.js.
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { benchCommand } from "./commands/bench.js";
import { cancelCommand } from "./commands/cancel.js";
import { cronCommand } from "./commands/cron.js";
import { dashboardCommand } from "./commands/dashboard.js";
import { deadCommand } from "./commands/dead.js";
import { demoCommand } from "./commands/demo.js";
import { enqueueCommand } from "./commands/enqueue.js";
import { flowCommand } from "./commands/flow.js";
import { jobCommand } from "./commands/job.js";
import { jobsCommand } from "./commands/jobs.js";
import { limitsCommand } from "./commands/limits.js";
import { migrateCommand } from "./commands/migrate.js";
import { pruneCommand } from "./commands/prune.js";
import { queueCommand } from "./commands/queue.js";
import { retryCommand } from "./commands/retry.js";
import { sagaCommand } from "./commands/saga.js";
import { statsCommand } from "./commands/stats.js";
import { workerCommand } from "./commands/worker.js";
import { shippedDoc } from "./docs.js";
import { describeError, EXIT_USAGE } from "./errors.js";
import { printError, terminalText } from "./terminal.js";

/** Adds one command (with its options, help and action) to the program. */
export type CliCommand = (program: Command) => void;

/** Every command, in the order `skipq --help` lists them. Add yours here. */
const commands: CliCommand[] = [
  migrateCommand,
  enqueueCommand,
  workerCommand,
  statsCommand,
  jobsCommand,
  jobCommand,
  flowCommand,
  deadCommand,
  retryCommand,
  cancelCommand,
  pruneCommand,
  queueCommand,
  sagaCommand,
  dashboardCommand,
  limitsCommand,
  cronCommand,
  demoCommand,
  benchCommand,
];

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    return pkg.version;
  } catch {
    return "unknown";
  }
}

/** Builds the program; exported for tests and for tools that embed the CLI. */
export function buildProgram(): Command {
  const program = new Command("skipq");
  program
    .description("A durable job queue that lives inside PostgreSQL: enqueue, run and inspect jobs.")
    .version(version(), "-v, --version")
    .option("--database-url <url>", "PostgreSQL connection string (default: $DATABASE_URL)")
    .option(
      "--read-database-url <url>",
      "where stats, listings and the dashboard's pages read from, e.g. a standby (default: $SKIPQ_READ_DATABASE_URL, else the database URL)",
    )
    .option("--schema <name>", 'schema holding skipq\'s tables (default: $SKIPQ_SCHEMA, else "skipq")')
    .showSuggestionAfterError(true)
    .showHelpAfterError(false)
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .configureOutput({
      // Commander prints "error: …" and "(Did you mean …?)" on two lines; keep it one line that says what to do.
      outputError: (text, write) => {
        const line = text
          .trim()
          .replace(/\n\(Did you mean (.*)\?\)/, " (did you mean $1?)")
          .replace(/\n/g, " ")
          .replace(/^error: /, "");
        write(`skipq: ${line}; see \`skipq --help\`\n`);
      },
    })
    .exitOverride()
    .addHelpText(
      "after",
      `
Configuration: flags first, then DATABASE_URL and SKIPQ_SCHEMA.
Exit codes: 0 success, 1 failure (database, unknown job), 2 bad input.
Every command, flag and JSON format: ${shippedDoc("cli.md")}.

Examples:
  $ skipq demo                      # no database needed
  $ export DATABASE_URL=postgres://postgres@127.0.0.1:5432/app
  $ skipq migrate
  $ skipq enqueue send-email --payload '{"to":"ada@example.com"}'
  $ skipq worker --tasks ./tasks.js --concurrency 20
  $ skipq stats`,
    );
  for (const add of commands) add(program);
  return program;
}

/** Runs the CLI with `argv` (as process.argv) and resolves to the exit code. */
export async function main(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  // No command at all (`skipq`, `skipq --`) asks what the tool does: the help, on stdout, exit 0.
  // Commander would print it on stderr as an error.
  if (argv.slice(2).every((a) => a === "--")) {
    program.outputHelp();
    return 0;
  }
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version "fail" with exit code 0; real usage errors were already printed by outputError.
      return error.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    const { message, exitCode } = describeError(error);
    // One line, whatever the message quotes (a bad --payload may hold newlines): escape them.
    printError(`skipq: ${terminalText(message.replace(/\r?\n/g, "\\n"), { newlines: false })}\n`);
    return exitCode;
  }
}
