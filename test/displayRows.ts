/**
 * Generated rows for the display property tests (test/ops/display-properties,
 * test/cli/display-properties): arbitrary JSON and text of the kinds
 * PostgreSQL accepts and skipq's own writers never produce — deep, wide,
 * non-array attempt logs, control characters, bidi overrides, the escape text
 * of lone surrogates, huge strings, markup — written with plain SQL into jobs
 * and job_history rows. Each row carries two markers the displays must never
 * show: KEY_SECRET under secret-looking keys of its JSON, TEXT_SECRET in
 * password=… pairs and bearer tokens of its error and log text.
 */
import fc from "fast-check";
import { insertRawJob, type TestQueue } from "./helpers.js";

export const KEY_SECRET = "KeySekr1tValue9";
export const TEXT_SECRET = "TxtSekr1tValue7";
/** Markup from data: a page that shows it raw is not escaped. */
export const MARKUP = "<skipq-evil>";

const SPECIAL = [
  "\u001b]0;retitled\u0007",
  "\u001b[2J\u001b[H",
  "\u001b[8m",
  "\u009b31m",
  "\r",
  "\t",
  "\n",
  "\u0085",
  "\u007f",
  "\u202e",
  "\u2066",
  "\\ud800",
  "\\udfff",
  "😀",
  "\ud83d\ude00",
  MARKUP,
  "</pre><script>",
  "&amp;",
  "\"'`",
  "password",
  "token:",
  "=",
];

/** Text PostgreSQL's text type holds: anything but NUL, lone surrogates made well-formed. */
const clean = (s: string) =>
  s
    .split("\u0000")
    .join("")
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");

const textOf = (huge: boolean): fc.Arbitrary<string> =>
  fc
    .array(
      fc.oneof(
        { weight: 4, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
        { weight: 4, arbitrary: fc.constantFrom(...SPECIAL) },
        { weight: huge ? 1 : 0, arbitrary: fc.constant("w".repeat(120_000)) },
      ),
      { maxLength: 8 },
    )
    .map((parts) => clean(parts.join("")));

export const hostileText: fc.Arbitrary<string> = textOf(true);
/** Short hostile text, for keys (an index entry holds at most a third of a page). */
const keyText: fc.Arbitrary<string> = textOf(false);

/** Text with the redactable secret in it, as a protocol worker's error might echo it. */
export const leakyText: fc.Arbitrary<string> = fc
  .tuple(
    hostileText,
    fc.constantFrom(` password=${TEXT_SECRET} `, ` Authorization: Bearer ${TEXT_SECRET}tok `),
    hostileText,
  )
  .map(([a, secret, b]) => `${a}${secret}${b}`);

/** Any JSON, with secret keys among its keys, and sometimes nested thousands of levels deep. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.jsonValue({ maxDepth: 2 }), hostileText).map(([v, text]) => ({
      password: KEY_SECRET,
      nested: [{ apiKey: KEY_SECRET, text }],
      v,
    })),
  },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 3000 }).map((depth) => deep(depth)) },
  { weight: 1, arbitrary: fc.array(hostileText, { maxLength: 50 }) },
);

/** Stands for JSON `depth` levels deep with a secret at the bottom; written as text (see jsonb). */
class Deep {
  constructor(readonly depth: number) {}
}
const deep = (depth: number) => new Deep(depth);

/** attempt_logs of any shape: the worker's own, wrong ones, or any JSON. */
export const hostileLogs: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.array(
      fc.record({
        attempt: fc.oneof(fc.nat(), hostileText, hostileJson),
        worker: fc.oneof(hostileText, leakyText, hostileJson),
        startedAt: fc.oneof(hostileText, fc.constant(null)),
        lastSeenAt: fc.oneof(leakyText, hostileJson),
        endedAt: hostileText,
        outcome: hostileText,
        error: fc.oneof(leakyText, fc.constant(null), hostileJson),
        lines: fc.oneof(
          fc.array(
            fc.oneof(
              fc.record({ at: hostileText, level: hostileText, msg: leakyText, extra: hostileJson }),
              hostileJson,
            ),
            { maxLength: 3 },
          ),
          hostileJson,
        ),
        dropped: fc.oneof(fc.nat(), hostileJson),
      }),
      { maxLength: 3 },
    ),
  },
  { weight: 1, arbitrary: hostileJson },
);

export interface RowCase {
  error: string;
  keys: { idempotency: string; concurrency: string; unique: string; debounce: string };
  lockedBy: string;
  payload: unknown;
  headers: unknown;
  result: unknown;
  progress: unknown;
  logs: unknown;
}

export const rowCase: fc.Arbitrary<RowCase> = fc.record({
  error: leakyText,
  keys: fc.record({ idempotency: keyText, concurrency: keyText, unique: keyText, debounce: keyText }),
  lockedBy: hostileText,
  payload: hostileJson,
  headers: hostileJson,
  result: hostileJson,
  progress: hostileJson,
  logs: hostileLogs,
});

/** JSON text PostgreSQL's jsonb takes: strings well-formed, no NUL (it refuses both as escapes). */
function jsonb(value: unknown): string {
  if (value instanceof Deep)
    return `${'[{"a":'.repeat(value.depth)}{"token":"${KEY_SECRET}"}${"}]".repeat(value.depth)}`;
  return JSON.stringify(value, (_k, v) => (typeof v === "string" ? clean(v) : v));
}

/** A pending job and a dead history row of `queue` written from `c` by plain SQL; their ids. */
export async function writeCase(
  t: TestQueue,
  queue: string,
  n: number,
  c: RowCase,
): Promise<{ live: string; dead: string }> {
  const common = {
    queue,
    last_error: c.error,
    payload: jsonb(c.payload),
    headers: jsonb(c.headers),
    result: jsonb(c.result),
    progress: jsonb(c.progress),
    attempt_logs: jsonb(c.logs),
  };
  // Keys get a case number, so rows of different cases never collide on a unique index.
  const live = await insertRawJob(t, {
    ...common,
    idempotency_key: `${c.keys.idempotency}#${n}`,
    concurrency_key: `${c.keys.concurrency}#${n}`,
    unique_key: `${c.keys.unique}#${n}`,
    debounce_key: `${c.keys.debounce}#${n}`,
    locked_by: c.lockedBy,
  });
  const dead = await insertRawJob(
    t,
    { ...common, error_fingerprint: c.keys.concurrency.slice(0, 40) },
    { history: true },
  );
  return { live, dead };
}
