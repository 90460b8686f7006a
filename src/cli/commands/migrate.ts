/**
 * `skipq migrate`: applies pending migrations to the schema (creating it).
 * Safe to run from many processes at once (the migrator takes an advisory
 * lock). The only admin command that writes DDL; it never drops anything.
 */
import type { Command } from "commander";
import { latestVersion } from "../../db/migrate.js";
import { printJson, withSession } from "../context.js";
import { print } from "../terminal.js";

export function migrateCommand(program: Command): void {
  program
    .command("migrate")
    .description("create or upgrade skipq's tables in the schema (safe to run concurrently)")
    .option("--json", "print the result as JSON")
    .addHelpText(
      "after",
      `
Example:
  $ skipq migrate --database-url postgres://postgres@127.0.0.1:5432/app --schema jobs`,
    )
    .action(async (options: { json?: boolean }, command: Command) => {
      await withSession(
        command,
        async ({ skipq, config }) => {
          const result = await skipq.migrate();
          if (options.json) {
            printJson({ schema: config.schema, from: result.from, to: result.to, applied: result.applied });
          } else if (result.applied.length === 0) {
            print(`schema "${config.schema}" is up to date (migration ${result.to})\n`);
          } else {
            print(
              `schema "${config.schema}" migrated from ${result.from} to ${result.to} (applied ${result.applied.join(", ")}; latest known ${latestVersion()})\n`,
            );
          }
        },
        { checkSchema: false },
      );
    });
}
