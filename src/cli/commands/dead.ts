/**
 * `skipq dead`: dead jobs grouped by error fingerprint (kind plus the error's
 * first line with numbers and ids masked), most frequent first, so one bad
 * deploy shows as one row, not ten thousand. Read-only; act on a group with
 * `skipq retry --dead --fingerprint <hex>`. The example error is redacted at
 * display time, whoever wrote it.
 */
import type { Command } from "commander";
import { displayError } from "../../ops/display.js";
import { firstLine, iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { parseInteger, parseName } from "../parse.js";
import { print } from "../terminal.js";

export function deadCommand(program: Command): void {
  program
    .command("dead")
    .description("dead jobs grouped by error, most frequent first")
    .option("-q, --queue <name>", "only this queue")
    .option("-n, --limit <n>", "at most this many groups (1-1000)", "20")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .addHelpText(
      "after",
      `
Examples:
  $ skipq dead
  $ skipq retry --dead --fingerprint 3f9a0c1d22e4b7a8`,
    )
    .action(async (flags: { queue?: string; limit: string; json?: boolean }, command: Command) => {
      const limit = parseInteger("--limit", flags.limit, 1, 1000);
      if (flags.queue !== undefined) parseName("queue", flags.queue);
      await withSession(command, async ({ admin }) => {
        const groups = await admin.deadByFingerprint({
          limit,
          ...(flags.queue !== undefined ? { queue: flags.queue } : {}),
        });
        if (flags.json) {
          printJson({
            groups: groups.map((g) => ({
              queue: g.queue,
              kind: g.kind,
              fingerprint: g.fingerprint,
              count: g.count,
              lastSeen: iso(g.last_seen),
              exampleId: g.example_id,
              exampleError: g.example_error === null ? null : displayError(g.example_error),
            })),
          });
        } else if (groups.length === 0) {
          print("no dead jobs\n");
        } else {
          print(
            `${table(
              ["jobs", "queue", "kind", "fingerprint", "last seen", "example", "error"],
              groups.map((g) => [
                g.count,
                g.queue,
                g.kind,
                g.fingerprint ?? "-",
                iso(g.last_seen) ?? "",
                g.example_id,
                firstLine(g.example_error === null ? null : displayError(g.example_error), 50),
              ]),
            )}\n`,
          );
        }
      });
    });
}
