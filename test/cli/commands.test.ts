/**
 * Happy paths of every command, through the built binary against real
 * PostgreSQL: what each prints (human and --json) and what it changes.
 */
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, test, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { DATABASE_URL, finishJobs, schemaName, useTestQueue } from "../helpers.js";
import { skipq } from "./run.js";

const t = useTestQueue("cli-commands");
let env: Record<string, string>;

beforeAll(async () => {
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
});

async function row(id: string) {
  const { rows } = await t.db.query(`SELECT * FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  return rows[0];
}

async function enqueue(...args: string[]): Promise<string> {
  const result = await skipq(["enqueue", ...args], env);
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  return result.stdout.trim();
}

describe.concurrent("cli commands", () => {
  describe("migrate", () => {
    test("migrate creates a fresh schema once and reports up to date the second time", async () => {
      const schema = schemaName("cli-migrate");
      try {
        const first = await skipq(["migrate", "--schema", schema, "--json"], { DATABASE_URL });
        expect(first.code).toBe(0);
        const result = JSON.parse(first.stdout);
        expect(result).toMatchObject({ schema, from: 0 });
        expect(result.applied.length).toBeGreaterThan(0);
        const second = await skipq(["migrate", "--schema", schema], { DATABASE_URL });
        expect(second.code).toBe(0);
        expect(second.stdout).toContain(`schema "${schema}" is up to date`);
      } finally {
        await t.db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
    });
  });

  describe("enqueue", () => {
    test("enqueue prints the new job's id and stores kind, payload, queue, priority and attempts", async () => {
      const id = await enqueue(
        "send-email",
        "--payload",
        '{"to":"ada@example.com"}',
        "--queue",
        "emails",
        "--priority",
        "-3",
        "--max-attempts",
        "4",
        "--header",
        "traceparent=00-abc",
      );
      expect(id).toMatch(/^\d+$/);
      const job = await row(id);
      expect(job).toMatchObject({
        kind: "send-email",
        queue: "emails",
        priority: -3,
        max_attempts: 4,
        status: "pending",
        payload: { to: "ada@example.com" },
        headers: { traceparent: "00-abc" },
      });
    });

    test("enqueue --delay sets run_at that far ahead on the database clock", async () => {
      const id = await enqueue("later", "--delay", "1h");
      const { rows } = await t.db.query(
        `SELECT extract(epoch FROM run_at - created_at) AS ahead FROM "${t.schema}".all_jobs WHERE id = $1`,
        [id],
      );
      expect(Number(rows[0].ahead)).toBeCloseTo(3600, 0);
    });

    test("enqueue --run-at stores that exact time", async () => {
      const id = await enqueue("scheduled", "--run-at", "2031-05-06T07:08:09Z");
      expect((await row(id)).run_at.toISOString()).toBe("2031-05-06T07:08:09.000Z");
    });

    test("a repeated idempotency key prints the existing id and adds nothing", async () => {
      const first = await enqueue("charge", "--payload", '{"order":42}', "--idempotency-key", "order-42");
      const again = await skipq(
        ["enqueue", "charge", "--payload", '{"order":42}', "--idempotency-key", "order-42"],
        env,
      );
      expect(again.code).toBe(0);
      expect(again.stdout.trim()).toBe(first);
      expect(again.stderr).toContain(`job ${first} already exists`);
      const json = await skipq(["enqueue", "charge", "--idempotency-key", "order-42", "--json"], env);
      expect(JSON.parse(json.stdout)).toEqual({ id: first, created: false });
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE idempotency_key = 'order-42'`,
      );
      expect(rows[0].n).toBe(1);
    });
  });

  describe("inspect", () => {
    test("stats --json counts jobs by queue and status", async () => {
      const queue = "statsq";
      await enqueue("a", "--queue", queue);
      await enqueue("a", "--queue", queue, "--delay", "1h");
      const dead = await enqueue("a", "--queue", queue);
      await finishJobs(t.db, t.schema, [dead], "dead");
      const result = await skipq(["stats", "--json"], env);
      expect(result.code).toBe(0);
      const stats = JSON.parse(result.stdout);
      expect(stats.schema).toBe(t.schema);
      expect(stats.queues.find((q: { queue: string }) => q.queue === queue)).toEqual({
        queue,
        paused: false,
        pending: 1,
        scheduled: 1,
        waiting: 0,
        running: 0,
        completed: 0,
        dead: 1,
        cancelled: 0,
        oldestPendingSeconds: expect.any(Number),
      });
      const human = await skipq(["stats"], env);
      expect(human.stdout).toMatch(/statsq\s+│\s+1 │\s+1 │/);
    });

    test("stats --help defines pending and scheduled as stats counts them, and as docs/cli.md does", async () => {
      const help = await skipq(["stats", "--help"]);
      expect(help.stdout).toContain('"pending" counts the jobs runnable now; "scheduled" the pending ones not due yet');
      const doc = readFileSync("docs/cli.md", "utf8").replace(/\s+/g, " ");
      expect(doc).toContain("`pending` counts the jobs runnable now; `scheduled` the pending ones not due yet");
    });

    test("jobs filters by status and queue and honours --limit", async () => {
      const queue = "listq";
      const ids = [
        await enqueue("x", "--queue", queue),
        await enqueue("x", "--queue", queue),
        await enqueue("x", "--queue", queue),
      ];
      await finishJobs(t.db, t.schema, [ids[0] as string], "completed");
      const pending = JSON.parse(
        (await skipq(["jobs", "--queue", queue, "--status", "pending", "--json"], env)).stdout,
      );
      expect(pending.jobs.map((j: { id: string }) => j.id)).toEqual([ids[2], ids[1]]);
      expect(pending.jobs[0]).toMatchObject({ queue, kind: "x", status: "pending", attempts: 0, maxAttempts: 10 });
      const limited = JSON.parse((await skipq(["jobs", "--queue", queue, "--limit", "1", "--json"], env)).stdout);
      expect(limited.jobs).toHaveLength(1);
      const human = await skipq(["jobs", "--queue", queue], env);
      expect(human.stdout).toContain(ids[1]);
    });

    test("job <id> shows every field, the payload and the full last error", async () => {
      const id = await enqueue("broken", "--payload", '{"n":1}');
      await t.db.query(`UPDATE "${t.schema}".jobs SET last_error = $2 WHERE id = $1`, [
        id,
        "Error: boom\n    at line 2",
      ]);
      const json = JSON.parse((await skipq(["job", id, "--json"], env)).stdout);
      expect(json).toMatchObject({
        id,
        kind: "broken",
        status: "pending",
        payload: { n: 1 },
        lastError: "Error: boom\n    at line 2",
      });
      const human = await skipq(["job", id], env);
      expect(human.code).toBe(0);
      expect(human.stdout).toContain("at line 2");
      expect(human.stdout).toContain('"n": 1');
    });
  });

  describe("act", () => {
    test("retry <id> puts a dead job back to pending with fresh attempts", async () => {
      const id = await enqueue("flaky");
      await finishJobs(t.db, t.schema, [id], "dead", { attempts: 10 });
      const result = await skipq(["retry", id], env);
      expect(result.code).toBe(0);
      expect(await row(id)).toMatchObject({ status: "pending", attempts: 0 });
    });

    test("retry --dead --queue retries only that queue's dead jobs", async () => {
      const mine = await enqueue("flaky", "--queue", "retryq");
      const other = await enqueue("flaky", "--queue", "otherq");
      await finishJobs(t.db, t.schema, [mine, other], "dead");
      const result = await skipq(["retry", "--dead", "--queue", "retryq", "--json"], env);
      expect(JSON.parse(result.stdout)).toEqual({ retried: 1 });
      expect((await row(mine)).status).toBe("pending");
      expect((await row(other)).status).toBe("dead");
    });

    test("dead groups dead jobs by fingerprint, and retry --dead --fingerprint retries only that group", async () => {
      const [a, b, c] = [
        await enqueue("fpkind", "--queue", "fpq"),
        await enqueue("fpkind", "--queue", "fpq"),
        await enqueue("fpkind", "--queue", "fpq"),
      ];
      const boom = { lastError: "Error: boom" };
      await finishJobs(t.db, t.schema, [a, b], "dead", { ...boom, fingerprint: "aaaaaaaaaaaaaaaa" });
      await finishJobs(t.db, t.schema, [c], "dead", { ...boom, fingerprint: "bbbbbbbbbbbbbbbb" });
      const groups = JSON.parse((await skipq(["dead", "--queue", "fpq", "--json"], env)).stdout).groups;
      expect(groups).toEqual([
        expect.objectContaining({
          queue: "fpq",
          kind: "fpkind",
          fingerprint: "aaaaaaaaaaaaaaaa",
          count: 2,
          exampleId: b,
        }),
        expect.objectContaining({
          fingerprint: "bbbbbbbbbbbbbbbb",
          count: 1,
          exampleId: c,
          exampleError: "Error: boom",
        }),
      ]);
      const retried = await skipq(["retry", "--dead", "--fingerprint", "aaaaaaaaaaaaaaaa", "--json"], env);
      expect(JSON.parse(retried.stdout)).toEqual({ retried: 2 });
      expect([(await row(a)).status, (await row(b)).status, (await row(c)).status]).toEqual([
        "pending",
        "pending",
        "dead",
      ]);
    });

    test("cancel <id> cancels a pending job", async () => {
      const id = await enqueue("unwanted");
      const result = await skipq(["cancel", id], env);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(`job ${id} cancelled`);
      expect((await row(id)).status).toBe("cancelled");
    });

    test("prune --older-than deletes old completed jobs and keeps recent and pending ones", async () => {
      const old = await enqueue("done", "--queue", "pruneq");
      const recent = await enqueue("done", "--queue", "pruneq");
      const pending = await enqueue("todo", "--queue", "pruneq");
      await finishJobs(t.db, t.schema, [old], "completed", { finishedAgo: "40 days" });
      await finishJobs(t.db, t.schema, [recent], "completed", { finishedAgo: "1 day" });
      await t.db.query(`UPDATE "${t.schema}".jobs SET updated_at = now() - interval '40 days' WHERE id = $1`, [
        pending,
      ]);
      const result = await skipq(["prune", "--older-than", "30d", "--json"], env);
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ deleted: 1 });
      expect(await row(old)).toBeUndefined();
      expect(await row(recent)).toBeDefined();
      expect(await row(pending)).toBeDefined();
    });

    test("queue pause and resume flip the queue's paused state", async () => {
      expect((await skipq(["queue", "pause", "pauseq"], env)).code).toBe(0);
      let list = JSON.parse((await skipq(["queue", "list", "--json"], env)).stdout);
      expect(list.queues).toContainEqual({ queue: "pauseq", paused: true, pausedAt: expect.any(String) });
      const stats = JSON.parse((await skipq(["stats", "--json"], env)).stdout);
      expect(stats.queues.find((q: { queue: string }) => q.queue === "pauseq")?.paused).toBe(true);
      expect((await skipq(["queue", "resume", "pauseq"], env)).code).toBe(0);
      list = JSON.parse((await skipq(["queue", "list", "--json"], env)).stdout);
      expect(list.queues).toContainEqual({ queue: "pauseq", paused: false, pausedAt: null });
    });
  });

  describe("help and configuration", () => {
    test("every command has --help with an example, and exits 0", async () => {
      // In-process (the same code as the binary) so twelve help screens do not cost twelve Node start-ups.
      const commands = [
        "migrate",
        "enqueue",
        "worker",
        "stats",
        "jobs",
        "job",
        "retry",
        "cancel",
        "prune",
        "queue",
        "demo",
        "bench",
      ];
      for (const command of commands) {
        let out = "";
        const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
          out += String(chunk);
          return true;
        });
        try {
          expect(await main(["node", "skipq", command, "--help"]), command).toBe(0);
        } finally {
          write.mockRestore();
        }
        expect(out, command).toMatch(/Examples?:\n\s+\$ \S*skipq /);
      }
      const top = await skipq(["--help"]);
      expect(top.code).toBe(0);
      expect(top.stdout).toContain("Exit codes: 0 success, 1 failure");
    });

    test("skipq with no command (or only `--`) prints the help on stdout and exits 0", async () => {
      // The chaos fuzzer found `skipq --` printing 59 lines of help on stderr with exit 2, as if it were bad input.
      for (const argv of [[], ["--"]]) {
        const bare = await skipq(argv);
        expect(bare.code, JSON.stringify(argv)).toBe(0);
        expect(bare.stderr).toBe("");
        expect(bare.stdout).toContain("Usage: skipq [options] [command]");
      }
    });

    test("--schema on the command line wins over SKIPQ_SCHEMA in the environment", async () => {
      const result = await skipq(["stats", "--json", "--schema", t.schema], {
        DATABASE_URL,
        SKIPQ_SCHEMA: "not_there",
      });
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout).schema).toBe(t.schema);
    });

    test("--database-url on the command line wins over DATABASE_URL in the environment", async () => {
      const result = await skipq(["stats", "--json", "--database-url", DATABASE_URL], {
        DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
        SKIPQ_SCHEMA: t.schema,
      });
      expect(result.code).toBe(0);
    });
  });
});
