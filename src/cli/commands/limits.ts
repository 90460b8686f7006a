/**
 * `skipq limits show|set` and `skipq limits pause-key|resume-key`: flow
 * control that every worker enforces in its claim (docs/flow-control.md).
 * `set` replaces all limits of a queue (an omitted one is removed), fairness
 * (`--fair`, `--weight key=n`) included.
 */
import type { Command } from "commander";
import { iso, printJson, table, withSession } from "../context.js";
import { shippedDoc } from "../docs.js";
import { CliError } from "../errors.js";
import { collect, parseDuration, parseInteger, parseName } from "../parse.js";
import { print } from "../terminal.js";

interface SetFlags {
  concurrency?: string;
  keyConcurrency?: string;
  rate?: string;
  perKey?: boolean;
  fair?: boolean;
  weight?: string[];
  json?: boolean;
}

/** ["acme=2", "globex=0.5"] → { acme: 2, globex: 0.5 }; the key is what precedes the last "=". */
function parseWeights(texts: readonly string[]): Record<string, number> {
  const weights: Record<string, number> = {};
  for (const text of texts) {
    const at = text.lastIndexOf("=");
    const key = text.slice(0, at);
    const number = text.slice(at + 1);
    const weight = Number(number);
    if (at <= 0 || !/^\d+(\.\d+)?$/.test(number) || !(weight > 0) || weight > 1_000_000)
      throw new CliError(
        `--weight ${JSON.stringify(text)} is not a weight: use key=number with a number above 0, e.g. --weight acme=2`,
      );
    if (Object.hasOwn(weights, key)) throw new CliError(`--weight names key ${JSON.stringify(key)} twice`);
    weights[key] = weight;
  }
  return weights;
}

/** "50/1s" → { limit: 50, window: 1000 }. */
function parseRate(text: string): { limit: number; window: number } {
  const match = /^(\d+)\s*\/\s*(\S+)$/.exec(text.trim());
  if (!match) throw new CliError(`--rate ${JSON.stringify(text)} is not a rate: use starts/window, e.g. --rate 50/1s`);
  return {
    limit: parseInteger("--rate", match[1] as string, 1, 1_000_000),
    window: parseDuration("--rate window", match[2] as string, { allowZero: false }),
  };
}

export function limitsCommand(program: Command): void {
  const limits = program
    .command("limits")
    .description("concurrency and rate limits per queue and per key, and key pauses")
    .addHelpText(
      "after",
      `
Examples:
  $ skipq limits set crm --concurrency 10 --key-concurrency 2 --rate 50/1s --per-key
  $ skipq limits set crm --fair --weight acme=2 --weight globex=0.5
  $ skipq limits set crm            (removes every limit of crm)
  $ skipq limits show --json
  $ skipq limits pause-key crm acme --for 30s
  $ skipq limits resume-key crm acme`,
    );
  limits
    .command("set")
    .description("replace the limits of a queue (omitted limits are removed)")
    .argument("<queue>", "queue name")
    .option("--concurrency <n>", "most running jobs of the queue")
    .option("--key-concurrency <n>", "most running jobs per concurrency key")
    .option("--rate <starts/window>", "most starts per sliding window, e.g. 50/1s")
    .option("--per-key", "apply --rate per concurrency key instead of to the whole queue")
    .option("--fair", "claim round robin across concurrency keys (jobs without a key are one key)")
    .option("--weight <key=n>", "with --fair: claims per round of a key (default 1; repeatable)", collect)
    .action(async (queue: string, flags: SetFlags, command: Command) => {
      parseName("queue", queue);
      const rate = flags.rate === undefined ? null : { ...parseRate(flags.rate), perKey: flags.perKey ?? false };
      if (flags.perKey && rate === null) throw new CliError("--per-key needs --rate, e.g. --rate 50/1s --per-key");
      if (flags.weight && !flags.fair) throw new CliError("--weight needs --fair, e.g. --fair --weight acme=2");
      const fairness = flags.fair ? { weights: parseWeights(flags.weight ?? []) } : null;
      const settings = {
        concurrency:
          flags.concurrency === undefined ? null : parseInteger("--concurrency", flags.concurrency, 1, 1_000_000),
        keyConcurrency:
          flags.keyConcurrency === undefined
            ? null
            : parseInteger("--key-concurrency", flags.keyConcurrency, 1, 1_000_000),
        rate,
        fairness,
      };
      await withSession(command, async ({ admin }) => {
        await admin.setQueueLimits(queue, settings);
        print(`limits of ${queue} set\n`);
      });
    });
  limits
    .command("show")
    .description("limits of one queue or of every queue with settings, and keys paused now")
    .argument("[queue]", "queue name")
    .option("--json", `print the stable JSON format (see ${shippedDoc("cli.md")})`)
    .action(async (queue: string | undefined, options: { json?: boolean }, command: Command) => {
      if (queue !== undefined) parseName("queue", queue);
      await withSession(command, async ({ admin }) => {
        const queues = await admin.getQueueLimits(queue);
        const keys = await admin.pausedKeys(queue);
        if (options.json) {
          printJson({ queues, pausedKeys: keys.map((k) => ({ ...k, pausedUntil: iso(k.pausedUntil) })) });
          return;
        }
        const rows = queues.map((q) => [
          q.queue,
          q.paused ? "yes" : "no",
          q.concurrency ?? "-",
          q.keyConcurrency ?? "-",
          q.rate ? `${q.rate.limit}/${q.rate.window}ms${q.rate.perKey ? " per key" : ""}` : "-",
          q.fairness
            ? ["yes", ...Object.entries(q.fairness.weights).map(([key, weight]) => `${key}=${weight}`)].join(" ")
            : "-",
        ]);
        print(
          rows.length === 0
            ? "no queue has limits\n"
            : `${table(["queue", "paused", "concurrency", "per key", "rate", "fair"], rows)}\n`,
        );
        for (const k of keys) print(`paused: ${k.queue} ${k.key ?? "(whole queue)"} until ${iso(k.pausedUntil)}\n`);
      });
    });
  limits
    .command("pause-key")
    .description("start no job with this key in this queue for a while (all workers)")
    .argument("<queue>", "queue name")
    .argument("[key]", "concurrency key; omit with --whole-queue")
    .requiredOption("--for <duration>", "how long, e.g. 30s")
    .option("--whole-queue", "pause every job of the queue for that long")
    .action(async (queue: string, key: string | undefined, flags: { for: string; wholeQueue?: boolean }, command) => {
      parseName("queue", queue);
      if ((key === undefined) === !flags.wholeQueue)
        throw new CliError("pass either a key or --whole-queue, e.g. skipq limits pause-key crm acme --for 30s");
      const ms = parseDuration("--for", flags.for, { allowZero: false });
      await withSession(command, async ({ admin }) => {
        const until = await admin.pauseKey(queue, key ?? null, ms);
        print(`${key ?? "every key"} of ${queue} paused until ${iso(until)}\n`);
      });
    });
  limits
    .command("resume-key")
    .description("end a key's pause now")
    .argument("<queue>", "queue name")
    .argument("[key]", "concurrency key; omit with --whole-queue")
    .option("--whole-queue", "end the queue-wide timed pause")
    .action(async (queue: string, key: string | undefined, flags: { wholeQueue?: boolean }, command: Command) => {
      parseName("queue", queue);
      if ((key === undefined) === !flags.wholeQueue)
        throw new CliError("pass either a key or --whole-queue, e.g. skipq limits resume-key crm acme");
      await withSession(command, async ({ admin }) => {
        const resumed = await admin.resumeKey(queue, key ?? null);
        print(resumed ? `${key ?? "queue"} of ${queue} resumed\n` : "it was not paused\n");
      });
    });
}
