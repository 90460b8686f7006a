/**
 * Security checks (matrix 7.7) against the real server, the real dashboard
 * and the built CLI: no route answers without credentials (S1); where seeded
 * secrets end up — stored errors, worker logs, rendered pages (S2); two
 * schemas in one database as two tenants (S3); least privilege with real
 * roles: an owner that migrates, a DML-only runtime role, an enqueue-only
 * role (S4). Roles are created per test and dropped after it.
 *
 * Invariants: without credentials nothing but 401 (or a refusal to start);
 * the dashboard renders no payload or header secret; a role without grants
 * on a schema reads nothing of it and a worker never claims across schemas;
 * each role can do what its grants say and nothing more.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { MigrationError, Skipq, silentLogger, startDashboard } from "../../src/index.js";
import { skipq as runCli, start as startCli } from "../cli/run.js";
import { CHAOS_WORKER, recordResult, statusCounts, until } from "./harness.js";
import { chaosSuite } from "./suite.js";

const suite = chaosSuite();
const queue = (label: string) => suite.queue(label);
const roles: string[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  const admin = new pg.Client({ connectionString: suite.server.url });
  await admin.connect();
  try {
    for (const role of roles.splice(0)) {
      await admin.query(`DROP OWNED BY ${role} CASCADE`).catch(() => undefined);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
    }
  } finally {
    await admin.end();
  }
});

/** Creates a login role (trust authentication: the embedded server's pg_hba) and its connection string. */
async function role(name: string, ...grants: string[]): Promise<string> {
  const admin = new pg.Client({ connectionString: suite.server.url });
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE ${name} LOGIN`);
    roles.push(name);
    for (const grant of grants) await admin.query(grant);
  } finally {
    await admin.end();
  }
  const url = new URL(suite.server.url);
  url.username = name;
  return url.toString();
}

/** SQLSTATE of what `run` throws, or "ok". */
async function outcome(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? (error as Error).name;
  }
}

describe("security", () => {
  it("S1: without credentials every dashboard route and method answers 401, and it refuses a non-loopback address", async () => {
    const q = await queue("s1");
    await q.skipq.enqueue("chaos", {});
    const d = await startDashboard({ skipq: q.skipq, port: 0, logger: silentLogger });
    cleanups.push(() => d.close());
    // Started without credentials on loopback: a one-time token, never "auth off".
    expect(d.generatedToken?.length).toBeGreaterThanOrEqual(16);
    const before = JSON.stringify(
      await q.db.query(`SELECT * FROM "${q.schema}".all_jobs ORDER BY id`).then((r) => r.rows),
    );
    const paths = [
      "/",
      "/jobs",
      "/jobs?status=dead",
      "/jobs/1",
      "/dead",
      "/metrics",
      "/login",
      "/logout",
      "/jobs/1/retry",
      "/jobs/1/cancel",
      "/queues/default/pause",
      "/queues/default/resume",
      "/queues/default/retry-dead",
      "/dead/retry",
      "/openapi.json",
      "/docs",
      "/api",
      "/favicon.ico",
      "/static/app.css",
      "/nope",
      "/%2e%2e/%2e%2e/etc/passwd",
    ];
    const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
    const answers: Record<string, number> = {};
    const open: string[] = [];
    for (const p of paths) {
      for (const method of methods) {
        const res = await fetch(`${d.url.replace(/\/$/, "")}${p}`, {
          method,
          redirect: "manual",
          ...(method === "POST" || method === "PUT" || method === "PATCH"
            ? { body: "_csrf=x&back=/", headers: { "content-type": "application/x-www-form-urlencoded" } }
            : {}),
        });
        await res.arrayBuffer();
        answers[res.status] = (answers[res.status] ?? 0) + 1;
        if (res.status !== 401) open.push(`${method} ${p} → ${res.status}`);
      }
    }
    // The same with wrong credentials of each kind.
    for (const authorization of [
      "Bearer wrong-token-wrong-token",
      `Basic ${Buffer.from("admin:wrong").toString("base64")}`,
    ]) {
      const res = await fetch(`${d.url}jobs`, { headers: { authorization }, redirect: "manual" });
      await res.arrayBuffer();
      if (res.status !== 401) open.push(`GET /jobs (${authorization.split(" ")[0]} wrong) → ${res.status}`);
    }
    expect(open).toEqual([]);
    // Positive control: the routes exist, and the generated token opens them.
    const signedIn = await fetch(`${d.url}jobs/1`, { headers: { authorization: `Bearer ${d.generatedToken}` } });
    expect(signedIn.status).toBe(200);
    await signedIn.arrayBuffer();
    const after = JSON.stringify(
      await q.db.query(`SELECT * FROM "${q.schema}".all_jobs ORDER BY id`).then((r) => r.rows),
    );
    expect(after).toBe(before);
    // No credentials and a non-loopback address: refused before listening (nothing is bound, nothing sent).
    const refusals: string[] = [];
    for (const host of ["0.0.0.0", "::", "192.0.2.10"]) {
      await expect(startDashboard({ skipq: q.skipq, port: 0, host, env: {}, logger: silentLogger })).rejects.toThrow(
        /refusing to serve the dashboard on .* without credentials/,
      );
      refusals.push(host);
    }
    const cli = await runCli(["dashboard", "--host", "0.0.0.0", "--port", "0"], {
      DATABASE_URL: q.url,
      SKIPQ_SCHEMA: q.schema,
    });
    expect(cli.code).not.toBe(0);
    expect(cli.stderr.trim().split("\n")).toHaveLength(1);
    expect(cli.stderr).toMatch(/^skipq: refusing to serve the dashboard on 0\.0\.0\.0 without credentials/);
    recordResult({
      row: "S1",
      title: `Dashboard without credentials: ${paths.length} paths (pages, actions, /metrics, docs/OpenAPI-style and unknown paths) × ${methods.length} methods, plus wrong Bearer and Basic`,
      config: "startDashboard on 127.0.0.1 with no credentials configured (one-time token generated)",
      lost: 0,
      duplicates: 0,
      other: `unauthenticated routes: ${open.length} (answers: ${JSON.stringify(answers)}); rows changed: 0; non-loopback without credentials refused: ${refusals.join(", ")} and \`skipq dashboard --host 0.0.0.0\` (exit ${cli.code}, one line)`,
    });
  });

  it("S2: seeded secrets are redacted from the dashboard's payload and header views; where else they land is counted", async () => {
    const q = await queue("s2");
    const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-s2-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const tasks = path.join(dir, "tasks.mjs");
    // A handler that echoes a secret into its error message: common, and what redaction must survive.
    writeFileSync(
      tasks,
      `export default { leaky: async (p) => { throw new Error("upstream refused api key " + p.apiKey + " for " + p.user); } };\n`,
    );
    const secrets = ["S2-SECRET-PASSWORD", "S2-SECRET-APIKEY", "S2-SECRET-TOKEN", "S2-SECRET-HEADER"];
    const payload = {
      user: "ada",
      password: secrets[0],
      apiKey: secrets[1],
      nested: { deeper: [{ token: secrets[2] }] },
    };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { id } = await q.skipq.enqueue("leaky", payload, {
        maxAttempts: 1,
        headers: { authorization: `Bearer ${secrets[3]}` },
      });
      ids.push(id);
    }
    const worker = startCli(["worker", "--tasks", tasks, "--concurrency", "2", "--poll-interval", "200ms"], {
      DATABASE_URL: q.url,
      SKIPQ_SCHEMA: q.schema,
    });
    cleanups.push(async () => {
      worker.child.kill("SIGKILL");
      await worker.exited;
    });
    await until("every job dead", async () => (await statusCounts(q)).dead === 3);
    worker.child.kill("SIGTERM");
    const logs = (await worker.exited).stderr;
    const count = (text: string, list: string[]) => list.reduce((n, s) => n + text.split(s).length - 1, 0);

    const d = await startDashboard({
      skipq: q.skipq,
      port: 0,
      auth: { token: "s2-token-s2-token-s2" },
      logger: silentLogger,
    });
    cleanups.push(() => d.close());
    const page = async (p: string) => {
      const res = await fetch(`${d.url}${p}`, { headers: { authorization: "Bearer s2-token-s2-token-s2" } });
      expect(res.status).toBe(200);
      return res.text();
    };
    const jobPage = await page(`jobs/${ids[0]}`);
    const rendered = jobPage + (await page("jobs")) + (await page("jobs?status=dead")) + (await page("dead"));
    // The payload was really rendered (redacted), not left out.
    expect(jobPage).toContain("[redacted]");
    expect(jobPage).toContain("ada");
    const payloadAndHeaderSecrets = [secrets[0], secrets[2], secrets[3]] as string[];
    const inPages = count(rendered, payloadAndHeaderSecrets);
    expect(inPages).toBe(0);
    // An error echoing the job's own secret is redacted before it is stored, logged by `skipq worker`,
    // or shown (the worker's default redactError).
    const { rows } = await q.db.query(`SELECT string_agg(last_error, E'\\n') AS errors FROM "${q.schema}".all_jobs`);
    expect(rows[0].errors).toContain("[redacted]");
    const inStoredErrors = count(rows[0].errors ?? "", secrets);
    const inLogs = count(logs, secrets);
    const errorInPages = count(rendered, [secrets[1] as string]);
    expect({ inStoredErrors, inLogs, errorInPages }).toEqual({ inStoredErrors: 0, inLogs: 0, errorInPages: 0 });
    recordResult({
      row: "S2",
      title:
        "Secrets in a payload (password, apiKey, token at depth 4), a header (authorization) and echoed into the handler's error; `skipq worker` runs it, the dashboard shows it",
      config: "default redactor (keys that look like secrets); skipq worker logs failed jobs (no --quiet)",
      lost: 0,
      duplicates: 0,
      other: `payload and header secrets in rendered pages: ${inPages}; seeded-secret hits in stored errors: ${inStoredErrors}, in the worker's log: ${inLogs}, secret echoed in an error shown on the dashboard: ${errorInPages} (errors are redacted before they are stored or printed: the job's own secrets, secret-looking pairs, bearer tokens)`,
    });
  });

  it("S3: two schemas in one database are two tenants: no cross-schema claim, notification or reap, and a role granted one cannot read the other", async () => {
    const a = await queue("s3-a");
    const b = await queue("s3-b");
    const ran: Array<{ worker: string; tenant: string }> = [];
    const heard = { a: [] as string[], b: [] as string[] };
    const listeners = await Promise.all(
      [a, b].map(async (q, i) => {
        const c = new pg.Client({ connectionString: q.url });
        await c.connect();
        c.on("notification", (m) => (i === 0 ? heard.a : heard.b).push(m.payload ?? ""));
        await c.query(`LISTEN ${pg.escapeIdentifier(q.skipq.channel)}`);
        return c;
      }),
    );
    cleanups.push(() => Promise.all(listeners.map((c) => c.end())));
    for (const [name, q] of [
      ["a", a],
      ["b", b],
    ] as const) {
      const w = q.skipq.worker({ ...CHAOS_WORKER, queues: ["default", `only-${name}`], concurrency: 4 });
      w.register("chaos", async (p) => {
        ran.push({ worker: name, tenant: (p as { tenant: string }).tenant });
      });
      suite.workers.push(w);
      await w.start();
    }
    // Expired leases in both schemas: each schema's leader reaps its own.
    for (const q of [a, b])
      await q.db.query(
        `INSERT INTO "${q.schema}".jobs (kind, payload, status, attempts, lease, lease_expires_at, locked_by)
         VALUES ('chaos', $1, 'running', 1, 1, now() - interval '1 second', 'ghost')`,
        [JSON.stringify({ tenant: q === a ? "a" : "b" })],
      );
    for (let i = 0; i < 20; i++) {
      await a.skipq.enqueue("chaos", { tenant: "a" }, { queue: i % 2 ? "default" : "only-a" });
      await b.skipq.enqueue("chaos", { tenant: "b" }, { queue: i % 2 ? "default" : "only-b" });
    }
    await until(
      "both tenants drained",
      async () => (await statusCounts(a)).completed === 21 && (await statusCounts(b)).completed === 21,
    );
    const crossClaims = ran.filter((r) => r.worker !== r.tenant).length;
    const crossNotifications =
      heard.a.filter((x) => x === "only-b").length + heard.b.filter((x) => x === "only-a").length;
    expect(ran.length).toBe(42);
    expect(crossClaims).toBe(0);
    expect(crossNotifications).toBe(0);
    expect(heard.a).toContain("only-a");

    // A role granted schema A only.
    const tenantA = await role(
      "s3_tenant_a",
      `GRANT USAGE ON SCHEMA "${a.schema}" TO s3_tenant_a`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${a.schema}" TO s3_tenant_a`,
    );
    const asA = new pg.Pool({ connectionString: tenantA, max: 2 });
    cleanups.push(() => asA.end());
    const matrix = {
      readOwnJobs: await outcome(() => asA.query(`SELECT count(*) FROM "${a.schema}".jobs`)),
      readOtherJobs: await outcome(() => asA.query(`SELECT payload FROM "${b.schema}".jobs`)),
      writeOtherJobs: await outcome(() => asA.query(`UPDATE "${b.schema}".jobs SET priority = 1`)),
      enqueueIntoOther: await outcome(async () => {
        const s = new Skipq({ connectionString: tenantA, schema: b.schema, logger: silentLogger });
        try {
          await s.enqueue("chaos", { tenant: "intruder" });
        } finally {
          await s.close();
        }
      }),
      workOtherSchema: await outcome(async () => {
        const s = new Skipq({ connectionString: tenantA, schema: b.schema, logger: silentLogger });
        const w = s.worker({ ...CHAOS_WORKER });
        try {
          await w.start();
        } finally {
          await w.stop();
          await s.close();
        }
      }),
    };
    expect(matrix).toEqual({
      readOwnJobs: "ok",
      readOtherJobs: "42501",
      writeOtherJobs: "42501",
      enqueueIntoOther: "42501",
      workOtherSchema: "42501",
    });
    // PostgreSQL has no privilege on channels: any role can LISTEN to another schema's (queue names only).
    const spy = new pg.Client({ connectionString: tenantA });
    await spy.connect();
    cleanups.push(() => spy.end());
    const spied: string[] = [];
    spy.on("notification", (m) => spied.push(m.payload ?? ""));
    await spy.query(`LISTEN ${pg.escapeIdentifier(b.skipq.channel)}`);
    await b.skipq.enqueue("chaos", { tenant: "b" }, { queue: "only-b" });
    await until("the spy heard it", () => spied.length > 0, 5000).catch(() => undefined);
    recordResult({
      row: "S3",
      title:
        "Two schemas (tenants) in one database, a worker each; 20 jobs each, an expired lease each; a role granted schema A only",
      config: "chaos worker settings; queues default + only-<tenant>",
      lost: 0,
      duplicates: 0,
      other: `cross-schema claims: ${crossClaims}; cross-schema notifications: ${crossNotifications}; each expired lease reaped by its own schema's leader (21 completed each); role granted A only: read B ${matrix.readOtherJobs}, write B ${matrix.writeOtherJobs}, enqueue into B ${matrix.enqueueIntoOther}, start a worker on B ${matrix.workOtherSchema}; NOTE: LISTEN has no privilege in PostgreSQL, so that role hears B's channel (queue names only): ${spied.length > 0 ? "yes" : "no"}`,
    });
  });

  it("S4: least privilege: the owner migrates, a DML-only role runs workers but cannot change the schema, an enqueue-only role can only insert", async () => {
    const schema = "s4_app";
    const ownerUrl = await role("s4_owner", "GRANT CREATE ON DATABASE postgres TO s4_owner");
    const owner = new Skipq({ connectionString: ownerUrl, schema, logger: silentLogger });
    cleanups.push(() => owner.close());
    const migrated = await owner.migrate();
    expect(migrated.applied.length).toBeGreaterThan(0);
    const runtimeUrl = await role("s4_runtime");
    const enqueueUrl = await role("s4_enqueue");
    const ownerDb = new pg.Pool({ connectionString: ownerUrl, max: 2 });
    cleanups.push(() => ownerDb.end());
    // Grants given by the owner: what docs/security guidance should list.
    await ownerDb.query(`GRANT USAGE ON SCHEMA ${schema} TO s4_runtime, s4_enqueue`);
    await ownerDb.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO s4_runtime`);
    // Retention's SECURITY DEFINER functions are not PUBLIC's (migration 0018): the worker role gets them by name.
    await ownerDb.query(
      `GRANT EXECUTE ON FUNCTION ${schema}.skipq_history_partition(text, timestamptz, timestamptz),
         ${schema}.skipq_history_drop(text, timestamptz), ${schema}.skipq_history_moved() TO s4_runtime`,
    );
    // Enqueue: INSERT, plus what its statements read and the key trigger touches (found by test: less fails with
    // 42501): the columns INSERT … RETURNING reads, the id sequence (a keyed insert takes its id with the key), and
    // job_keys, where a keyed insert takes its key (ON CONFLICT on queue and key) and the trigger may reopen it.
    await ownerDb.query(`GRANT INSERT, SELECT (id, queue, idempotency_key, run_at) ON ${schema}.jobs TO s4_enqueue`);
    await ownerDb.query(`GRANT USAGE ON SEQUENCE ${schema}.jobs_id_seq TO s4_enqueue`);
    await ownerDb.query(
      `GRANT INSERT, SELECT (queue, key, job_id, finished_at), UPDATE (finished_at) ON ${schema}.job_keys TO s4_enqueue`,
    );

    const runtime = new Skipq({ connectionString: runtimeUrl, schema, logger: silentLogger });
    cleanups.push(() => runtime.close());
    const runtimeDb = new pg.Pool({ connectionString: runtimeUrl, max: 2 });
    cleanups.push(() => runtimeDb.end());
    // Everything a worker does, as the runtime role: claim, heartbeat, complete, fail and retry, reap (as leader), presence.
    const ran: string[] = [];
    const w = runtime.worker({ ...CHAOS_WORKER, concurrency: 4, backoff: { baseMs: 10, maxMs: 10, jitter: 0 } });
    w.register("work", async (p, ctx) => {
      ran.push(ctx.id);
      if ((p as { fail?: boolean }).fail && ctx.attempt === 1) throw new Error("first attempt fails");
      await new Promise((r) => setTimeout(r, 700)); // longer than a heartbeat
    });
    suite.workers.push(w);
    await runtimeDb.query(
      `INSERT INTO ${schema}.jobs (kind, status, attempts, lease, lease_expires_at, locked_by) VALUES ('work', 'running', 1, 1, now() - interval '1 second', 'ghost')`,
    );
    const enqueuer = new Skipq({ connectionString: enqueueUrl, schema, logger: silentLogger });
    cleanups.push(() => enqueuer.close());
    for (let i = 0; i < 6; i++) await enqueuer.enqueue("work", { fail: i === 0 });
    await enqueuer.enqueue("work", {}, { idempotencyKey: "k1" });
    const repeat = await enqueuer.enqueue("work", {}, { idempotencyKey: "k1" });
    expect(repeat.created).toBe(false);
    await enqueuer.enqueueMany([{ job: "work", payload: {} }]);
    await w.start();
    await until("every job completed as the runtime role", async () => {
      const { rows } = await ownerDb.query(
        `SELECT count(*)::int AS n FROM ${schema}.all_jobs WHERE status = 'completed'`,
      );
      return rows[0].n === 9;
    });
    const { rows: presence } = await ownerDb.query(`SELECT count(*)::int AS n FROM ${schema}.workers WHERE id = $1`, [
      w.id,
    ]);
    expect(presence[0].n).toBe(1);
    // Leader-only maintenance as the runtime role: the pruner makes and drops history partitions (DDL) through
    // the SECURITY DEFINER history functions (migrations 0008 and 0018), so DML rights and EXECUTE on them are enough.
    await until("the runtime worker leads maintenance", () => w.maintainer?.leader.isLeader === true, 15_000);
    const prunerAsRuntime = await outcome(async () => w.maintainer?.pruner?.runOnce());
    expect(prunerAsRuntime).toBe("ok");
    const fresh = new Skipq({ connectionString: runtimeUrl, schema: "s4_other", logger: silentLogger });
    cleanups.push(() => fresh.close());
    const migrateAsRuntime = await fresh.migrate().then(
      () => "ok",
      (e) => (e instanceof MigrationError ? `MigrationError, SQLSTATE ${e.sqlState}` : String(e)),
    );
    const jobs = `${schema}.jobs`;
    const matrix = {
      runtime: {
        createTable: await outcome(() => runtimeDb.query(`CREATE TABLE ${schema}.x (a int)`)),
        alterJobs: await outcome(() => runtimeDb.query(`ALTER TABLE ${jobs} ADD COLUMN x int`)),
        dropJobs: await outcome(() => runtimeDb.query(`DROP TABLE ${jobs}`)),
        truncateJobs: await outcome(() => runtimeDb.query(`TRUNCATE ${jobs}`)),
        createSchema: await outcome(() => runtimeDb.query("CREATE SCHEMA s4_evil")),
      },
      enqueue: {
        readPayload: await outcome(() => enqueuerQuery(enqueueUrl, `SELECT payload FROM ${jobs}`)),
        readError: await outcome(() => enqueuerQuery(enqueueUrl, `SELECT last_error FROM ${jobs}`)),
        update: await outcome(() => enqueuerQuery(enqueueUrl, `UPDATE ${jobs} SET priority = 5`)),
        delete: await outcome(() => enqueuerQuery(enqueueUrl, `DELETE FROM ${jobs}`)),
        claimSql: await outcome(() =>
          enqueuerQuery(enqueueUrl, runtime.store.sql.jobs.jobClaimBatch.text, [["default"], 1, "x", 1000]),
        ),
        claimProtocol: await outcome(() =>
          enqueuerQuery(enqueueUrl, `SELECT * FROM ${schema}.skipq_claim(ARRAY['default'], 1, 'x', 1000)`),
        ),
        completeProtocol: await outcome(() => enqueuerQuery(enqueueUrl, `SELECT ${schema}.skipq_complete(1, 1)`)),
        readQueues: await outcome(() => enqueuerQuery(enqueueUrl, `SELECT * FROM ${schema}.queues`)),
        readHistory: await outcome(() => enqueuerQuery(enqueueUrl, `SELECT payload FROM ${schema}.job_history`)),
        rewriteKeys: await outcome(() => enqueuerQuery(enqueueUrl, `UPDATE ${schema}.job_keys SET job_id = 1`)),
        startWorker: await outcome(async () => {
          const ww = enqueuer.worker({ ...CHAOS_WORKER });
          try {
            await ww.start();
          } finally {
            await ww.stop();
          }
        }),
      },
    };
    expect(migrateAsRuntime).toBe("MigrationError, SQLSTATE 42501");
    expect(matrix).toEqual({
      runtime: {
        createTable: "42501",
        alterJobs: "42501",
        dropJobs: "42501",
        truncateJobs: "42501",
        createSchema: "42501",
      },
      enqueue: {
        readPayload: "42501",
        readError: "42501",
        update: "42501",
        delete: "42501",
        claimSql: "42501",
        claimProtocol: "42501",
        completeProtocol: "42501",
        readQueues: "42501",
        readHistory: "42501",
        rewriteKeys: "42501",
        startWorker: "42501",
      },
    });
    recordResult({
      row: "S4",
      title:
        "Roles: owner (CREATE on the database) migrates; runtime (USAGE + SELECT/INSERT/UPDATE/DELETE on the tables) runs a worker; enqueue-only (INSERT and a few columns, see Other)",
      config: "real roles on the embedded server, dropped after the test",
      lost: 0,
      // 9 jobs (8 enqueued, the reaped one) and the one planned retry.
      duplicates: ran.length - 9 - 1,
      other: `runtime role: claim, heartbeat, retry, complete, reap (leader) and presence all work (9/9 completed, the expired lease reaped); denied: CREATE/ALTER/DROP/TRUNCATE/CREATE SCHEMA (42501), migrating a new schema (${migrateAsRuntime}); the leader's pruner pass as the runtime role: ${prunerAsRuntime} (partitions through the owner's SECURITY DEFINER functions); enqueue role (INSERT + SELECT (id, queue, idempotency_key, run_at) on jobs, USAGE on jobs_id_seq, INSERT + SELECT (queue, key, job_id, finished_at) + UPDATE (finished_at) on job_keys): enqueue, idempotent enqueue and enqueueMany work; denied (42501): reading payloads, errors, history or other tables, UPDATE, DELETE, rewriting keys, the claim statement, skipq_claim/skipq_complete (SECURITY INVOKER), starting a worker; it can read ids, queues, idempotency keys and run_at`,
    });
  });
});

/** One statement as the enqueue-only role, on a connection of its own. */
async function enqueuerQuery(url: string, text: string, values: unknown[] = []): Promise<unknown> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}
