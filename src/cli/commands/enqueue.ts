/**
 * `skipq enqueue <kind>`: adds one job and prints its id. With a repeated
 * idempotency key it prints the existing job's id and says nothing was added.
 * Invariant: every flag is parsed and checked before the database is touched,
 * so bad input writes nothing.
 */
import type { Command } from "commander";
import type { EnqueueOptions } from "../../skipq.js";
import { printJson, withSession } from "../context.js";
import { CliError } from "../errors.js";
import { parseDate, parseDuration, parseId, parseInteger, parseJson, parseName } from "../parse.js";
import { print, printError } from "../terminal.js";

interface EnqueueFlags {
  payload: string;
  queue?: string;
  priority?: string;
  delay?: string;
  runAt?: string;
  idempotencyKey?: string;
  maxAttempts?: string;
  header?: string[];
  dependsOn?: string[];
  onParentFailure?: string;
  json?: boolean;
}

function headers(pairs: string[] | undefined): Record<string, string> | undefined {
  if (!pairs || pairs.length === 0) return undefined;
  const result: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at <= 0)
      throw new CliError(`--header ${JSON.stringify(pair)} is not name=value: use e.g. --header traceparent=00-…`);
    result[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return result;
}

export function enqueueCommand(program: Command): void {
  program
    .command("enqueue")
    .description("add one job and print its id")
    .argument("<kind>", "job kind (the handler's name), e.g. send-email")
    .option("-p, --payload <json>", "the job's payload as JSON", "{}")
    .option("-q, --queue <name>", 'queue (default "default")')
    .option("--priority <n>", "higher runs first, -32768..32767 (default 0)")
    .option("--delay <duration>", "run no earlier than this long from now, e.g. 10s, 5m, 2h")
    .option("--run-at <iso>", "run no earlier than this time, e.g. 2030-01-01T09:00:00Z (not with --delay)")
    .option("--idempotency-key <key>", "at most one job per queue and key; a repeat prints the existing id")
    .option("--max-attempts <n>", "attempts before the job is dead (default 10)")
    .option(
      "--header <name=value>",
      "metadata for the handler (ctx.job.headers); repeatable",
      (v, prev: string[] = []) => [...prev, v],
    )
    .option(
      "--depends-on <ids>",
      "wait until these jobs completed (comma-separated ids; repeatable): the job is created waiting",
      (v, prev: string[] = []) => [...prev, ...v.split(",")],
    )
    .option("--on-parent-failure <policy>", "with --depends-on: cancel (default), run or wait")
    .option("--json", 'print {"id","created"} as JSON')
    .addHelpText(
      "after",
      `
Examples:
  $ skipq enqueue send-email --payload '{"to":"ada@example.com"}'
  $ skipq enqueue report --queue slow --priority -5 --delay 10m
  $ skipq enqueue charge --payload '{"order":42}' --idempotency-key order-42
  $ skipq enqueue publish --depends-on 41,42 --on-parent-failure run`,
    )
    .action(async (kind: string, flags: EnqueueFlags, command: Command) => {
      // Parse everything first: bad input must never reach the database.
      parseName("kind", kind);
      const payload = parseJson("--payload", flags.payload);
      if (flags.delay !== undefined && flags.runAt !== undefined) {
        throw new CliError("pass either --delay or --run-at, not both");
      }
      const options: EnqueueOptions = {};
      if (flags.queue !== undefined) options.queue = parseName("queue", flags.queue);
      if (flags.priority !== undefined) options.priority = parseInteger("--priority", flags.priority, -32768, 32767);
      if (flags.delay !== undefined) options.delay = parseDuration("--delay", flags.delay);
      if (flags.runAt !== undefined) options.runAt = parseDate("--run-at", flags.runAt);
      if (flags.idempotencyKey !== undefined) options.idempotencyKey = flags.idempotencyKey;
      if (flags.maxAttempts !== undefined)
        options.maxAttempts = parseInteger("--max-attempts", flags.maxAttempts, 1, 1_000_000);
      const hdrs = headers(flags.header);
      if (hdrs) options.headers = hdrs;
      if (flags.dependsOn !== undefined)
        options.dependsOn = flags.dependsOn.map((id) => parseId(id, "--depends-on id"));
      if (flags.onParentFailure !== undefined) {
        if (flags.dependsOn === undefined) throw new CliError("--on-parent-failure needs --depends-on <ids>");
        if (!["cancel", "run", "wait"].includes(flags.onParentFailure)) {
          throw new CliError(
            `--on-parent-failure must be cancel, run or wait, got ${JSON.stringify(flags.onParentFailure)}`,
          );
        }
        options.onParentFailure = flags.onParentFailure as "cancel" | "run" | "wait";
      }

      await withSession(command, async ({ skipq }) => {
        const result = await skipq.enqueue(kind, payload, options);
        if (flags.json) {
          printJson({ id: result.id, created: result.created });
          return;
        }
        print(`${result.id}\n`);
        if (!result.created) {
          printError(
            `skipq: job ${result.id} already exists with idempotency key ${JSON.stringify(options.idempotencyKey)} in queue "${options.queue ?? "default"}"; nothing was added\n`,
          );
        }
      });
    });
}
