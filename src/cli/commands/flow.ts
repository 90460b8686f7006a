/**
 * `skipq flow <id>`: the workflow graph around one job — the jobs it waits
 * for and the jobs waiting for it, with each one's state and result. An
 * unknown id exits 1. Read-only.
 */
import type { Command } from "commander";
import type { FlowNode } from "../../ops/adminTypes.js";
import { displayJson } from "../../ops/display.js";
import { printJson, table, withSession } from "../context.js";
import { CliError, EXIT_FAILURE } from "../errors.js";
import { parseId } from "../parse.js";
import { print } from "../terminal.js";

/** A result as one table cell: its JSON, cut to 60 characters. */
function shown(result: unknown): string {
  if (result === null || result === undefined) return "-";
  const text = displayJson(result);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

export function flowCommand(program: Command): void {
  program
    .command("flow")
    .description("show the workflow graph around a job: its parents and children, their state and result")
    .argument("<id>", "the job's id")
    .option("--json", 'print {"job", "parents", "children"} as JSON (each {id, kind, status, result})')
    .addHelpText(
      "after",
      `
At most 1,000 parents and 1,000 children are shown. A pruned job shows no kind or status.

Examples:
  $ skipq flow 42
  $ skipq flow 42 --json | jq '.children[] | select(.status != "completed")'`,
    )
    .action(async (idText: string, options: { json?: boolean }, command: Command) => {
      const id = parseId(idText);
      await withSession(command, async ({ admin, config }) => {
        const flow = await admin.jobFlow(id);
        if (!flow) {
          throw new CliError(
            `job ${id} does not exist in schema "${config.schema}": list jobs with \`skipq jobs\``,
            EXIT_FAILURE,
          );
        }
        if (options.json) {
          printJson(flow);
          return;
        }
        const row = (role: string, n: FlowNode): string[] => [
          role,
          n.id,
          n.kind ?? "-",
          n.status ?? "(pruned)",
          shown(n.result),
        ];
        const rows = [
          ...flow.parents.map((n) => row("parent", n)),
          row("this job", flow.job),
          ...flow.children.map((n) => row("child", n)),
        ];
        print(`${table(["", "id", "kind", "status", "result"], rows)}\n`);
      });
    });
}
