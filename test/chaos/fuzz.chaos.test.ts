/**
 * Property-based fuzzing (fast-check) of the two surfaces people type into:
 * the built CLI (bin/skipq.js, spawned for real against a seeded schema) and
 * the dashboard's HTTP surface (startDashboard, spoken to over raw TCP so
 * malformed requests reach it).
 *
 * Invariants: the CLI never crashes or prints a stack trace; bad input gets
 * one line on stderr, nothing on stdout and a non-zero exit; the dashboard
 * never answers 500; neither ever writes (schema, catalog and every row
 * hashed before and after). Generated write commands always carry one value
 * that is invalid by construction, so a write would be a bug, not luck.
 */
import net from "node:net";
import fc from "fast-check";
import ms from "ms";
import { describe, expect, it } from "vitest";
import { NAME_PATTERN, SCHEMA_PATTERN } from "../../src/core/validate.js";
import type { Logger } from "../../src/index.js";
import { startDashboard } from "../../src/index.js";
import { skipq as runCli } from "../cli/run.js";
import { type ChaosQueue, recordResult } from "./harness.js";
import { chaosSuite } from "./suite.js";

const suite = chaosSuite();
const COMMANDS = [
  "migrate",
  "enqueue",
  "worker",
  "stats",
  "jobs",
  "job",
  "dead",
  "retry",
  "cancel",
  "prune",
  "queue",
  "saga",
  "dashboard",
  "limits",
  "cron",
  "demo",
  "bench",
  "help",
];

/** Catalog (every relation of every schema) and every row of the queue's schema, hashed. */
async function stateHash(q: ChaosQueue): Promise<string> {
  const parts: string[] = [];
  const { rows: catalog } = await q.db.query(
    `SELECT md5(string_agg(n.nspname || '.' || c.relname || ':' || c.relkind::text, ',' ORDER BY n.nspname, c.relname)) AS h
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT LIKE 'pg_%'`,
  );
  parts.push(catalog[0].h);
  const { rows: tables } = await q.db.query("SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", [
    q.schema,
  ]);
  for (const { tablename } of tables) {
    // A signed-in request moves its session's last_seen_at (the idle timeout): bookkeeping, not a write.
    // Which sessions exist is still hashed, so a sign-in or sign-out the fuzzer caused would show.
    const row = tablename === "dashboard_sessions" ? "(t.id, t.principal, t.expires_at)" : "t";
    const { rows } = await q.db.query(
      `SELECT md5(coalesce(string_agg(${row}::text, ',' ORDER BY ${row}::text), '')) AS h FROM "${q.schema}"."${tablename}" t`,
    );
    parts.push(`${tablename}:${rows[0].h}`);
  }
  return parts.join("|");
}

/** A logged error as one line (its path and message), so a failure report says what went wrong. */
function describeLogged(entry: unknown): string {
  const { err, path } = (entry ?? {}) as { err?: unknown; path?: unknown };
  return `${String(path)}: ${err instanceof Error ? err.message : String(err)}`;
}

/** The parts of two state hashes that differ ("catalog" or a table name). */
function changedTables(before: string, after: string): string[] {
  const a = before.split("|");
  const b = after.split("|");
  return b.flatMap((part, i) => (part === a[i] ? [] : [i === 0 ? "catalog" : (part.split(":")[0] ?? part)]));
}

async function seed(q: ChaosQueue): Promise<void> {
  const s = `"${q.schema}"`;
  // A live job, and finished ones in the history table (dead, cancelled, completed).
  await q.db.query(`INSERT INTO ${s}.jobs (kind, queue) VALUES ('fuzz', 'default')`);
  await q.db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, last_error, created_at, finished_at)
     VALUES (1001, 'default', 'fuzz', '{}', 'dead', 0, 3, 3, now(), 'Error: boom', now(), now()),
            (1002, 'other', 'fuzz', '{}', 'cancelled', 0, 1, 3, now(), 'cancelled', now(), now()),
            (1003, 'default', 'fuzz', '{}', 'completed', 0, 1, 3, now(), NULL, now(), now())`,
  );
}

// ---------- the CLI ----------

const NASTY = [
  "",
  " ",
  "'; DROP TABLE jobs;--",
  "a\nb",
  "\t",
  "%s%n%x",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal text "${HOME}" is the hostile input.
  "${HOME}",
  "$(id)",
  "../../etc/passwd",
  "-1",
  "-5s",
  "1e309",
  "NaN",
  "Infinity",
  "0x10",
  "１２",
  "9".repeat(40),
  "x".repeat(3000),
  "-",
  "--",
  "{",
  "[]",
  "null",
  "😀",
  "\u202eevil",
  "\\",
  "2030-13-45T99:99:99Z",
  "0",
  "99999999999999999999999",
];
/** Strings a user might type or paste; never NUL (an argv cannot hold one). */
const hostile = fc
  .oneof(
    { weight: 3, arbitrary: fc.constantFrom(...NASTY) },
    { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }) },
    { weight: 1, arbitrary: fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String) },
    { weight: 1, arbitrary: fc.double().map(String) },
  )
  .filter((s) => !s.includes("\u0000"));

const badName = hostile.filter((s) => !NAME_PATTERN.test(s));
const badInt = (min: number, max: number) =>
  hostile.filter((s) => !/^[+-]?\d+$/.test(s.trim()) || Number(s) < min || Number(s) > max);
const badDuration = (allowZero = true) =>
  hostile.filter((s) => {
    let v: number | undefined;
    try {
      v = /^[+-]?\d+(\.\d+)?$/.test(s.trim()) ? Number(s) : ms(s.trim() as ms.StringValue);
    } catch {
      v = undefined; // ms() throws on "": invalid
    }
    return !(
      typeof v === "number" &&
      Number.isFinite(v) &&
      v >= 0 &&
      v <= 10 * 365 * 86_400_000 &&
      (allowZero || v > 0)
    );
  });
const badJson = hostile.filter((s) => {
  try {
    JSON.parse(s);
    return false;
  } catch {
    return true;
  }
});
const badDate = fc.oneof(
  hostile.filter((s) => !/^\d{4}-\d{2}-\d{2}/.test(s.trim())),
  fc.constantFrom("2030-13-45", "2030-02-30T25:61:00Z", "0000-00-00"),
);
/** Never one of the seeded jobs: malformed, or far beyond them (exit 1, "does not exist"). */
const badId = fc.oneof(
  hostile.filter((s) => !/^\d+$/.test(s.trim()) || s.trim().length > 6),
  fc.bigInt({ min: 1_000_000n, max: 2n ** 70n }).map(String),
);
/** Never a connection string the CLI would try (so no traffic leaves this machine). */
const badUrl = hostile.filter((s) => !/^(postgres(ql)?:\/\/|socket:|\/)/.test(s.trim()) && s.trim() !== "");
/** The CLI trims --schema, and an empty one means the default: neither counts as bad. */
const badSchema = hostile.filter((s) => s.trim() !== "" && !SCHEMA_PATTERN.test(s.trim()));

interface CliCase {
  argv: string[];
  /** A write command with one invalid value: it must fail. */
  mustFail: boolean;
  /** Input the user can fix by retyping: exit 2 ("bad input"), never 1. */
  usage: boolean;
}
const write = (argv: fc.Arbitrary<string[]>) => argv.map((a): CliCase => ({ argv: a, mustFail: true, usage: true }));
/** A write command naming a job that is malformed or does not exist (exit 2 or 1). */
const writeId = (argv: fc.Arbitrary<string[]>) => argv.map((a): CliCase => ({ argv: a, mustFail: true, usage: false }));
const read = (argv: fc.Arbitrary<string[]>) => argv.map((a): CliCase => ({ argv: a, mustFail: false, usage: false }));

const cliCase: fc.Arbitrary<CliCase> = fc.oneof(
  write(badName.map((k) => ["enqueue", k])),
  write(badJson.map((p) => ["enqueue", "fuzz-kind", "--payload", p])),
  write(badName.map((v) => ["enqueue", "fuzz-kind", "--queue", v])),
  write(badInt(-32768, 32767).map((v) => ["enqueue", "fuzz-kind", "--priority", v])),
  write(badDuration().map((v) => ["enqueue", "fuzz-kind", "--delay", v])),
  write(badDate.map((v) => ["enqueue", "fuzz-kind", "--run-at", v])),
  write(badInt(1, 1_000_000).map((v) => ["enqueue", "fuzz-kind", "--max-attempts", v])),
  write(hostile.filter((s) => !s.includes("=")).map((v) => ["enqueue", "fuzz-kind", "--header", v])),
  writeId(badId.map((v) => ["retry", v])),
  writeId(badId.map((v) => ["cancel", v])),
  write(badDuration().map((v) => ["prune", "--older-than", v])),
  write(
    hostile
      .filter((s) => !s.split(",").every((x) => ["completed", "dead", "cancelled"].includes(x.trim())))
      .map((v) => ["prune", "--older-than", "1d", "--status", v]),
  ),
  write(fc.tuple(fc.constantFrom("pause", "resume"), badName).map(([verb, v]) => ["queue", verb, v])),
  write(badName.map((v) => ["limits", "set", v, "--concurrency", "5"])),
  write(badInt(1, 1_000_000).map((v) => ["limits", "set", "fuzzq", "--concurrency", v])),
  write(badDuration(false).map((v) => ["limits", "pause-key", "fuzzq", "k", "--for", v])),
  write(badSchema.map((v) => ["migrate", "--schema", v])),
  write(badInt(0, 65_535).map((v) => ["dashboard", "--port", v])),
  write(hostile.map((v) => ["worker", "--concurrency", v])), // no --tasks: refused before anything starts
  write(badUrl.map((v) => ["--database-url", v, "enqueue", "fuzz-kind"])),
  read(badId.map((v) => ["job", v])),
  read(badId.map((v) => ["saga", v])),
  read(
    fc
      .tuple(fc.constantFrom("--status", "--queue", "--kind", "--limit", "--before"), hostile)
      .map(([flag, v]) => ["jobs", flag, v]),
  ),
  read(fc.tuple(fc.constantFrom("--queue", "--limit"), hostile).map(([flag, v]) => ["dead", flag, v])),
  read(hostile.map((v) => ["limits", "show", v])),
  read(hostile.map((v) => ["stats", v])),
  read(hostile.map((v) => ["stats", `--${v}`])),
  read(hostile.filter((v) => !COMMANDS.includes(v.trim())).map((v) => [v])),
  read(badSchema.map((v) => ["--schema", v, "stats"])),
  read(fc.array(hostile, { maxLength: 4 }).map((extra) => ["cron", "list", ...extra])),
);

/** fast-check's failure report, cut short: a counterexample may hold 20 KB strings. */
function shortReport<T>(details: fc.RunDetails<T>): void {
  if (!details.failed) return;
  const cause = String((details.errorInstance as Error | undefined)?.message ?? details.errorInstance).slice(0, 2000);
  const text = fc.defaultReportMessage(details) ?? "property failed";
  throw new Error(
    `${cause}\n${text.length > 3000 ? `${text.slice(0, 3000)}… [${text.length - 3000} more chars]` : text}`,
  );
}

function helpOrVersion(argv: string[]): boolean {
  return argv.some((a) => ["-h", "--help", "-v", "--version", "help"].includes(a));
}

describe("fuzz", () => {
  it("F1: the CLI, fed generated bad arguments, never crashes or prints a stack, fails with one line, and writes nothing (property)", async () => {
    const q = await suite.queue("f1");
    await seed(q);
    const before = await stateHash(q);
    const env = { DATABASE_URL: q.url, SKIPQ_SCHEMA: q.schema };
    const exits: Record<string, number> = {};
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(cliCase, { minLength: 3, maxLength: 3 }), async (cases) => {
        const results = await Promise.all(cases.map((c) => runCli(c.argv, env)));
        results.forEach((r, i) => {
          const c = cases[i] as CliCase;
          const what = JSON.stringify(c.argv).slice(0, 300);
          runs++;
          exits[String(r.code ?? r.signal)] = (exits[String(r.code ?? r.signal)] ?? 0) + 1;
          expect(r.signal, what).toBe(null);
          expect([0, 1, 2], what).toContain(r.code);
          expect(`${r.stdout}\n${r.stderr}`, what).not.toMatch(/\n\s+at .+:\d+:\d+\)?|node:internal|Uncaught/);
          if (r.code !== 0) {
            expect(r.stdout, what).toBe("");
            expect(r.stderr.trimEnd().split("\n"), what).toHaveLength(1);
            expect(r.stderr, what).toMatch(/^skipq: \S/);
            if (c.usage) expect(r.code, `${what}: ${r.stderr}`).toBe(2);
          } else if (c.mustFail) {
            expect(helpOrVersion(c.argv), `${what} succeeded`).toBe(true);
          }
        });
        expect(changedTables(before, await stateHash(q))).toEqual([]);
      }),
      {
        numRuns: Number(process.env.CHAOS_FUZZ_CLI_RUNS ?? 20),
        reporter: shortReport,
        // Found by this property once (blank durations reached the ms library, which threw a bare Error: exit 1,
        // "val is not a non-empty string"); kept as explicit first examples.
        examples: [
          [
            [
              { argv: ["enqueue", "fuzz-kind", "--delay", ""], mustFail: true, usage: true },
              { argv: ["prune", "--older-than", "   "], mustFail: true, usage: true },
              { argv: ["limits", "pause-key", "fuzzq", "k", "--for", ""], mustFail: true, usage: true },
            ],
          ],
          // Found in CI: `skipq --` printed the whole help on stderr with exit 2 (now: help on stdout, exit 0).
          [
            [
              { argv: ["--"], mustFail: false, usage: false },
              { argv: ["--schema", "\u000e", "stats"], mustFail: false, usage: false },
              { argv: ["limits", "show", ""], mustFail: false, usage: false },
            ],
          ],
          // Found in CI: JSON.parse's message quotes the bad input, newline included, so the error took two lines.
          [
            [
              { argv: ["enqueue", "fuzz-kind", "--payload", "a\nb"], mustFail: true, usage: true },
              { argv: ["cron", "list"], mustFail: false, usage: false },
              { argv: ["enqueue", "fuzz-kind", "--payload", "{\n"], mustFail: true, usage: true },
            ],
          ],
        ],
      },
    );
    recordResult({
      row: "F1",
      title:
        "Property: the built CLI with generated bad arguments (31 shapes: every write command with one invalid value, read commands with hostile values, unknown commands and flags, bad --schema / --database-url)",
      config: `fast-check, ${runs} CLI processes against a seeded schema`,
      lost: 0,
      duplicates: 0,
      other: `crashes or stack traces: 0; exits: ${JSON.stringify(exits)}; every failure one line on stderr, nothing on stdout; schema, catalog and row hashes unchanged`,
    });
  });

  it("F2: the dashboard, fed generated malformed, oversized and ill-typed HTTP requests, never answers 500 and never writes (property)", async () => {
    const q = await suite.queue("f2");
    await seed(q);
    const errors: unknown[] = [];
    const quiet = () => undefined;
    const logger: Logger = { debug: quiet, info: quiet, warn: quiet, error: (o) => errors.push(o) };
    const token = "f2-token-f2-token-f2-token";
    const d = await startDashboard({ skipq: q.skipq, port: 0, auth: { token }, logger });
    const port = Number(new URL(d.url).port);
    try {
      const login = await raw(port, {
        method: "POST",
        target: "/login",
        headers: ["Content-Type: application/x-www-form-urlencoded"],
        body: `token=${token}`,
      });
      const cookie = /set-cookie: (skipq_session=[^;]+)/i.exec(login.head)?.[1];
      expect(cookie).toBeDefined();
      const before = await stateHash(q);
      const statuses: Record<string, number> = {};
      let requests = 0;
      const segment = fc.oneof(
        fc.constantFrom("jobs", "dead", "queues", "metrics", "login", "logout", "retry", "cancel", "pause", "1", "4"),
        hostile.map((s) => encodeURIComponent(s)),
        fc.constantFrom("%", "%zz", "%00", "%2F", "..", ".", "", "9".repeat(30), "-1"),
      );
      const target = fc.oneof(
        fc.constantFrom(
          "/",
          "/jobs",
          "/jobs/1",
          "/jobs/2/retry",
          "/dead",
          "/dead/retry",
          "/queues/default/pause",
          "/metrics",
          "*",
        ),
        fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => `/${parts.join("/")}`),
        fc
          .tuple(
            fc.constantFrom("/", "/jobs", "/dead", "/login"),
            fc.array(fc.tuple(hostile, hostile), { maxLength: 4 }),
          )
          .map(
            ([p, qs]) => `${p}?${qs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&")}`,
          ),
        fc.constantFrom(
          `/jobs?q=${"x".repeat(300)}`,
          `/${"a".repeat(20_000)}`,
          "http://evil.example/jobs",
          "//evil.example/",
        ),
      );
      const auth = fc.constantFrom("none", "wrong-bearer", "bearer", "cookie", "bad-basic", "bad-cookie");
      const contentType = fc.oneof(
        fc.constantFrom(
          undefined,
          "application/x-www-form-urlencoded",
          "text/plain",
          "application/json",
          "multipart/form-data; boundary=x",
          "application/x-www-form-urlencoded; charset=utf-16",
        ),
        hostile.filter((s) => /^[\x20-\x7e]*$/.test(s)),
      );
      const body = fc.oneof(
        fc.constantFrom("", "_csrf=x&back=/", "back=//evil.example/&_csrf=", "fingerprint=abc&queue=default"),
        hostile,
        fc.constantFrom("a=".padEnd(20_000, "b"), "\u0000\u0001\u00ff"),
      );
      const general = fc
        .record({
          method: fc.constantFrom(
            "GET",
            "HEAD",
            "POST",
            "PUT",
            "DELETE",
            "PATCH",
            "OPTIONS",
            "TRACE",
            "PROPFIND",
            "G@T",
          ),
          target,
          auth,
          contentType,
          body,
          extraHeader: fc.constantFrom(
            undefined,
            `X-Big: ${"y".repeat(20_000)}`,
            "Origin: null",
            "Origin: http://evil.example",
            "Bad Header",
            "Transfer-Encoding: chunked",
          ),
        })
        // A valid bearer token skips CSRF (browsers never attach it), so a well-formed bearer POST of a
        // form to an action is a legitimate write: the generator never builds one.
        .filter(
          (r) =>
            !(
              r.auth === "bearer" &&
              r.method === "POST" &&
              (r.contentType ?? "").startsWith("application/x-www-form-urlencoded")
            ),
        );
      // Authenticated form POSTs (bearer: no CSRF) to action paths whose argument is malformed: refused, never run.
      const malformedAction = fc.record({
        method: fc.constant("POST"),
        target: fc.oneof(
          fc
            .tuple(
              fc.oneof(
                fc.constantFrom("%", "%zz", "%ZZ", "%E0%A4%A", "%C0%80", "%FF"),
                badName.map(encodeURIComponent),
              ),
              fc.constantFrom("pause", "resume", "retry-dead"),
            )
            .map(([queue, verb]) => `/queues/${queue}/${verb}`),
          fc
            .tuple(
              hostile.filter((h) => !/^[1-9][0-9]*$/.test(h)).map(encodeURIComponent),
              fc.constantFrom("retry", "cancel"),
            )
            .map(([id, verb]) => `/jobs/${id}/${verb}`),
        ),
        auth: fc.constant("bearer"),
        contentType: fc.constant<string | undefined>("application/x-www-form-urlencoded"),
        body: fc.constant("back=/"),
        extraHeader: fc.constant<string | undefined>(undefined),
      });
      const request = fc.oneof({ weight: 8, arbitrary: general }, { weight: 2, arbitrary: malformedAction });
      await fc.assert(
        fc.asyncProperty(fc.array(request, { minLength: 5, maxLength: 5 }), async (batch) => {
          const answers = await Promise.all(
            batch.map((r) => {
              const headers: string[] = [];
              if (r.auth === "bearer") headers.push(`Authorization: Bearer ${token}`);
              if (r.auth === "wrong-bearer") headers.push("Authorization: Bearer nope-nope-nope-nope");
              if (r.auth === "bad-basic") headers.push("Authorization: Basic !!!not-base64:");
              if (r.auth === "cookie") headers.push(`Cookie: ${cookie}`);
              if (r.auth === "bad-cookie") headers.push("Cookie: skipq_session=1.2.3; skipq_flash=%E0%A4%A");
              if (r.contentType !== undefined) headers.push(`Content-Type: ${r.contentType}`);
              if (r.extraHeader) headers.push(r.extraHeader);
              return raw(port, { method: r.method, target: r.target, headers, body: r.body });
            }),
          );
          answers.forEach((a, i) => {
            requests++;
            const what = JSON.stringify(batch[i]).slice(0, 300);
            statuses[a.status] = (statuses[a.status] ?? 0) + 1;
            expect(a.status, what).toBeGreaterThanOrEqual(200);
            expect(a.status, what).toBeLessThan(500);
            expect(a.head + a.body, what).not.toMatch(/Something went wrong|\n\s+at .+:\d+:\d+/);
          });
          // As one string: fast-check's report keeps the assertion's message, where an array shows as "[ …(2) ]".
          expect(errors.map(describeLogged).join("\n")).toBe("");
          expect(changedTables(before, await stateHash(q))).toEqual([]);
        }),
        {
          numRuns: Number(process.env.CHAOS_FUZZ_HTTP_RUNS ?? 60),
          reporter: shortReport,
          // Found by this property once (an authenticated POST to /queues/%ZZ/pause answered 500, "URI malformed").
          examples: [
            [
              ["%", "%ZZ", "%E0%A4%A", "%C0%80", "%FF"].map((queue) => ({
                method: "POST",
                target: `/queues/${queue}/pause`,
                auth: "bearer",
                contentType: "application/x-www-form-urlencoded" as string | undefined,
                body: "back=/",
                extraHeader: undefined as string | undefined,
              })),
            ],
          ],
        },
      );
      recordResult({
        row: "F2",
        title:
          "Property: the dashboard's HTTP surface over raw TCP: any method (incl. unknown and malformed), paths and query strings from hostile strings, 20 KB paths, headers and bodies, bad content types, chunked and broken framing, forged or missing credentials",
        config: `fast-check, ${requests} requests (a bearer form POST to an action is generated only with a malformed argument)`,
        lost: 0,
        duplicates: 0,
        other: `answers: ${JSON.stringify(statuses)}; 500s: 0; errors logged: 0; schema, catalog and row hashes unchanged`,
      });
    } finally {
      await d.close();
    }
  });
});

/**
 * One HTTP/1.1 request over a raw socket (so malformed ones reach the server as sent); the status,
 * head and body of the answer. A connection closed with no answer counts as status 0.
 */
function raw(
  port: number,
  r: { method: string; target: string; headers: string[]; body: string },
): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve) => {
    const body = Buffer.from(r.body, "utf8");
    const chunked = r.headers.some((h) => /^transfer-encoding: chunked/i.test(h));
    const head = [
      `${r.method} ${r.target} HTTP/1.1`,
      "Host: 127.0.0.1",
      "Connection: close",
      ...r.headers,
      ...(chunked ? [] : [`Content-Length: ${body.length}`]),
      "",
      "",
    ].join("\r\n");
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    // No answer within 10 s is a hang: status 0 fails the property (the server closes after answering).
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const split = text.indexOf("\r\n\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, head: split < 0 ? text : text.slice(0, split), body: split < 0 ? "" : text.slice(split + 4) });
    });
    // Written, not ended: Node's server drops a request whose client half-closes before the answer.
    // A chunked body that never ends properly: broken framing on purpose.
    socket.write(Buffer.concat([Buffer.from(head, "latin1"), chunked ? Buffer.from(`zz\r\n${r.body}\r\n`) : body]));
  });
}
