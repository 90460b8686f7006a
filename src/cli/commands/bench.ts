/**
 * `skipq bench [args…]`: runs the benchmark harness (`bench/run.ts`, with tsx)
 * from a checkout of the repository, passing every argument through and the
 * resolved DATABASE_URL/SKIPQ_SCHEMA in its environment. The harness ships
 * with the repository, not the npm package; without it this says so.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { type GlobalOptions, resolveConfig } from "../context.js";
import { CliError, EXIT_FAILURE } from "../errors.js";

export function benchCommand(program: Command): void {
  // An installed package has no harness: the command stays (it says where to run it) but leaves the help.
  const harness = fileURLToPath(new URL("../../../../bench/run.ts", import.meta.url));
  program
    .command("bench", { hidden: !existsSync(harness) })
    .description("run the benchmarks (bench/run.ts in a checkout of the repository); arguments pass through")
    .argument("[args...]", "arguments for bench/run.ts (see `skipq bench -- --help`)")
    .allowUnknownOption(true)
    .helpOption("-h, --help", "show this help (use `skipq bench -- --help` for the harness's own)")
    .addHelpText(
      "after",
      `
Examples:
  $ skipq bench
  $ skipq bench -- --help`,
    )
    .action(async (args: string[], _options: unknown, command: Command) => {
      const root = fileURLToPath(new URL("../../../../", import.meta.url));
      const script = fileURLToPath(new URL("../../../../bench/run.ts", import.meta.url));
      if (!existsSync(script)) {
        throw new CliError(
          `the benchmarks are not here (${script} is missing): they ship with the repository, not the npm package; clone it and run \`npm run build && node bin/skipq.js bench\` there`,
          EXIT_FAILURE,
        );
      }
      resolveConfig(command); // validates --schema early
      const flags = command.optsWithGlobals<GlobalOptions>();
      const env = { ...process.env };
      // Only what the user passed explicitly; the environment is inherited as is.
      if (flags.databaseUrl) env.DATABASE_URL = flags.databaseUrl;
      if (flags.schema) env.SKIPQ_SCHEMA = flags.schema;
      const code = await new Promise<number>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
          cwd: root,
          stdio: "inherit",
          env,
        });
        const forward = (signal: NodeJS.Signals) => child.kill(signal);
        process.on("SIGINT", forward);
        process.on("SIGTERM", forward);
        child.on("error", (error) => {
          process.stderr.write(`skipq: could not start the benchmarks: ${error.message}\n`);
          resolve(EXIT_FAILURE);
        });
        child.on("exit", (exitCode, signal) => {
          process.off("SIGINT", forward);
          process.off("SIGTERM", forward);
          resolve(exitCode ?? (signal ? EXIT_FAILURE : 0));
        });
      });
      process.exitCode = code;
    });
}
