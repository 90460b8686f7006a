/**
 * `skipq saga <id>`: a saga's status, its steps (status, result, error) and
 * the job that must make progress next. An unknown id exits 1. Read-only.
 */
import type { Command } from "commander";
import { displayJson } from "../../ops/display.js";
import { getSaga } from "../../saga/define.js";
import { iso, printJson, table, withSession } from "../context.js";
import { CliError, EXIT_FAILURE } from "../errors.js";
import { parseId } from "../parse.js";
import { print } from "../terminal.js";

export function sagaCommand(program: Command): void {
  program
    .command("saga")
    .description("show one saga: its status, each step's status, result and error, and its current job")
    .argument("<id>", "the saga's id")
    .option("--json", "print the saga as JSON")
    .addHelpText(
      "after",
      `
Examples:
  $ skipq saga 7
  $ skipq saga 7 --json | jq -r .status`,
    )
    .action(async (idText: string, options: { json?: boolean }, command: Command) => {
      const id = parseId(idText, "saga id", "it is what Sagas.startSaga returned");
      await withSession(command, async ({ skipq, config }) => {
        const saga = await getSaga(skipq, id);
        if (!saga) {
          throw new CliError(
            `saga ${idText} does not exist in schema "${config.schema}": check the id, or pass the schema with --schema`,
            EXIT_FAILURE,
          );
        }
        if (options.json) {
          printJson({ ...saga, createdAt: iso(saga.createdAt), updatedAt: iso(saga.updatedAt) });
          return;
        }
        print(
          `saga ${saga.id} (${saga.name}): ${saga.status}, step ${saga.currentStep}, job ${saga.currentJobId ?? "-"}\n`,
        );
        if (saga.error) print(`error: ${saga.error}\n`);
        const rows = saga.steps.map((step, i): [string, string, string, string] => [
          String(i),
          step.name,
          step.status,
          step.error ?? (step.result === undefined ? "-" : displayJson(step.result)),
        ]);
        print(`${table(["#", "step", "status", "result / error"], rows)}\n`);
      });
    });
}
