/**
 * A primary failover under a draining fleet (issue 25, items 2 and 3). Two
 * database hosts (namespaces on one switch, lan.ts) with real streaming
 * replication from Debian's PostgreSQL 15; four worker processes on an app
 * host draining 30,000 jobs with cron ticking every second in each, and a
 * producer enqueueing meanwhile; the primary's postmaster SIGKILLed at about
 * a third; the standby promoted; the old primary back afterwards, read-only.
 * Rows: N7 a synchronous standby, workers on a multi-host URL
 * (target_session_attrs=read-write), the test promoting; N8 the same with one
 * virtual IP moved to the new primary instead (vip-manager's way); N9 an
 * asynchronous standby, its loss window measured; N10 pg_auto_failover, whose
 * monitor (a third host) detects the dead node and promotes.
 *
 * Invariants checked: lost = 0 for every job the new primary holds, and (with
 * a synchronous standby) no acknowledged enqueue missing; every duplicate is
 * of a job running at the crash; each worker claims on the new primary within
 * 30 s of the promotion and never exits; every worker's LISTEN is back, on the
 * new primary; a maintenance leader holds the lease there; cron ticks are
 * neither missed nor doubled; a worker pinned to the old primary, which holds
 * jobs across the crash, cannot record their outcomes once that server is back
 * read-only (refused with 25006), and other workers finish them.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type ChaosQueue,
  type ChildHandle,
  chaosQueue,
  killAllChildren,
  recordRun,
  spawnWorker,
} from "../chaos/harness.js";
import { type LedgerEntry, readLedger, reconcile } from "../chaos/ledger.js";
import { PgServer, replicaSet, replicationUnavailable, stopAllServers } from "../replication.js";
import { until } from "../until.js";
import { AutoFailoverCluster, autoFailoverUnavailable, MONITOR_SETTINGS } from "./autofailover.js";
import { FLEET_CONFIG, FLEET_SESSION, FLEET_WORKER } from "./fleet.js";
import { arpingUnavailable, LAN_PREFIX, Lan, type LanHost } from "./lan.js";
import { namespacesUnavailable } from "./net.js";

/**
 * The fleet's settings with a 10 s lease (production's 30 s scaled down): a promoted standby and a restarting
 * old primary share this machine's 2 CPUs, and the first seconds after a promotion can stall a statement for
 * longer than the fleet's 2 s lease, which would turn jobs claimed after the failover into duplicates (as D6
 * shows for restarts). The leader lease stays 2 s: the maintainer's takeover is measured.
 */
const FAILOVER_WORKER = { ...FLEET_WORKER, lockTimeout: "10s", heartbeatInterval: "1s" } as const;
const FAILOVER_CONFIG = FLEET_CONFIG.replace("lease 2s, heartbeat 0.5s", "lease 10s, heartbeat 1s");

const JOBS = 30_000;
/** Long jobs the pinned worker holds across the crash. */
const STALE = 10;
const WORKERS = 4;
const RESUME_BAR_MS = 30_000;
const VIP = `${LAN_PREFIX}.100`;
const TRUST = [`${LAN_PREFIX}.0/24`];

const lan = new Lan();
let db1: LanHost;
let db2: LanHost;
let app: LanHost;
let mon: LanHost;
const queues: ChaosQueue[] = [];
let cluster: AutoFailoverCluster | undefined;

beforeAll(() => {
  const unavailable =
    namespacesUnavailable() ?? replicationUnavailable() ?? arpingUnavailable() ?? autoFailoverUnavailable();
  if (unavailable) throw new Error(`the failover rows cannot run here: ${unavailable}`);
  db1 = lan.addHost("db1", 11);
  db2 = lan.addHost("db2", 12);
  app = lan.addHost("app", 20);
  mon = lan.addHost("mon", 30);
});
afterEach(async () => {
  await killAllChildren();
  for (const q of queues.splice(0)) await q.cleanup();
  await cluster?.stop();
  cluster = undefined;
  await stopAllServers();
});
afterAll(() => {
  lan.destroy();
});

/** Queryable handles on one server (by its own address). */
type Server = Pick<PgServer, "query" | "name">;

interface Failover {
  /** Where the workers and the producer connect. */
  workerUrl: string;
  /** What the test reads through: always the primary of the moment. */
  observerUrl: string;
  /** The old primary alone (the pinned worker's URL: one host, no target_session_attrs). */
  oldPrimaryUrl: string;
  oldPrimary: Server;
  newPrimary: Server;
  /** Resolves once the standby has replayed everything the primary wrote. */
  caughtUp(): Promise<void>;
  /** Breaks the primary; resolves when it is dead. */
  crash(): Promise<void>;
  /** Resolves with the time (Date.now()) the new primary took writes. */
  promoted(): Promise<number>;
  /** Brings the old primary back read-only; resolves with the time it answers. */
  comeBack(): Promise<number>;
}

const host = (h: LanHost) => `${h.address}:5432`;

/** A primary on db1 and its standby on db2, started by the test (rows N7-N9). */
async function manual(o: { sync: boolean; vip: boolean }): Promise<Failover> {
  const set = await replicaSet({
    sync: o.sync,
    primary: { host: db1.address, port: 5432, prefix: lan.prefix(db1), trust: TRUST },
    standby: { host: db2.address, port: 5432, prefix: lan.prefix(db2), trust: TRUST },
  });
  const list = `postgres://postgres@${host(db1)},${host(db2)}/postgres?target_session_attrs=read-write&connect_timeout=2`;
  if (o.vip) lan.moveAddress(VIP, db1);
  const { caughtUp } = await import("../replication.js");
  return {
    workerUrl: o.vip ? `postgres://postgres@${VIP}:5432/postgres?connect_timeout=2` : list,
    observerUrl: list,
    oldPrimaryUrl: set.primary.url(),
    oldPrimary: set.primary,
    newPrimary: set.standby,
    caughtUp: () => caughtUp(set.primary, set.standby),
    crash: () => set.primary.kill("SIGKILL"),
    async promoted() {
      await set.standby.promote();
      const promotedAt = Date.now();
      // vip-manager moves the address once the new leader is known (after the promotion).
      if (o.vip) lan.moveAddress(VIP, db2);
      return promotedAt;
    },
    async comeBack() {
      // Fenced: what a demoted primary is until it is rebuilt as a standby.
      await set.primary.restart({ default_transaction_read_only: "on" });
      return Date.now();
    },
  };
}

/** pg_auto_failover: a monitor on its own host, keepers on db1 and db2 (row N10). */
async function managed(): Promise<Failover> {
  const c = new AutoFailoverCluster(lan);
  cluster = c;
  await c.startMonitor(mon);
  await c.addNode("node1", db1, "single");
  await c.addNode("node2", db2, "secondary");
  await c.healthy();
  // What `pg_autoctl show uri` gives applications, with the user, and libpq's sslmode semantics for node-postgres.
  const uri = c.uri().replace("postgres://", "postgres://postgres@");
  const ssl = "sslmode=require&uselibpqcompat=true";
  const params = { port: 5432, params: ssl };
  const oldPrimary = new PgServer({ name: "node1", host: db1.address, ...params });
  const newPrimary = new PgServer({ name: "node2", host: db2.address, ...params });
  return {
    workerUrl: `${uri.replace("sslmode=require", ssl)}&connect_timeout=2`,
    observerUrl: `${uri.replace("sslmode=require", ssl)}&connect_timeout=2`,
    oldPrimaryUrl: oldPrimary.url(),
    oldPrimary,
    newPrimary,
    async caughtUp() {
      const { rows } = await oldPrimary.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn");
      await until("node2 caught up", async () => {
        const r = await newPrimary.query<{ ok: boolean }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok", [
          rows[0]?.lsn,
        ]);
        return r.rows[0]?.ok;
      });
    },
    // The primary's host dies: its keeper and its PostgreSQL, SIGKILLed together.
    crash: () => (c.nodes[0] as { kill(): Promise<void> }).kill(),
    async promoted() {
      // The monitor promotes node2; it takes writes once pg_auto_failover lifts its fencing (wait_primary).
      await until(
        "node2 promoted by the monitor and writable",
        async () => {
          const { rows } = await newPrimary
            .query<{ ro: string; rec: boolean }>(
              "SELECT current_setting('transaction_read_only') AS ro, pg_is_in_recovery() AS rec",
            )
            .catch(() => ({ rows: [] as Array<{ ro: string; rec: boolean }> }));
          return rows[0]?.ro === "off" && rows[0]?.rec === false;
        },
        60_000,
        100,
      );
      return Date.now();
    },
    async comeBack() {
      // node1's keeper restarts; the monitor has it rewind and rejoin as a standby (read-only).
      c.restart(0);
      await until(
        "node1 back as a secondary",
        async () =>
          (await c.states().catch(() => [])).some((s) => s.nodename === "node1" && s.reportedstate === "secondary"),
        90_000,
        250,
      ).catch((error) => {
        throw new Error(`${(error as Error).message}\n${c.logs()}`);
      });
      return Date.now();
    },
  };
}

async function counted(q: ChaosQueue, where: string): Promise<number> {
  const { rows } = await q.db.query(`SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE ${where}`);
  return rows[0].n;
}

/** `check`, with a database that is down meanwhile counting as "not yet". */
const tolerant =
  <T>(check: () => Promise<T>) =>
  () =>
    check().catch(() => undefined);

interface RowSpec {
  row: string;
  title: string;
  config: string;
  /** A synchronous standby: nothing acknowledged may be missing on the new primary. */
  sync: boolean;
  /**
   * How the old primary comes back: fenced (its own data, read-only: the long jobs it handed out stay running
   * there) or rebuilt as a standby of the new primary (pg_rewind: it shows what the new primary has).
   */
  comesBack: "fenced" | "standby";
  setup(): Promise<Failover>;
}

async function runFailover(spec: RowSpec): Promise<void> {
  const f = await spec.setup();
  const startedAt = Date.now();
  const q = await chaosQueue(f.observerUrl, spec.row.toLowerCase());
  queues.push(q);
  // The long jobs' handlers end once this file exists: after the old primary is back read-only.
  const release = path.join(q.ledgerDir, "release-long-jobs");
  const s = `"${q.schema}"`;
  await q.db.query(
    `INSERT INTO ${s}.jobs (kind, payload, max_attempts) SELECT 'chaos', '{"ms":2}', 10 FROM generate_series(1, $1)`,
    [JOBS],
  );
  await q.db.query(
    `INSERT INTO ${s}.jobs (queue, kind, payload, max_attempts) SELECT 'stale', 'chaos', $2::jsonb, 10 FROM generate_series(1, $1)`,
    [STALE, JSON.stringify({ untilFile: release })],
  );
  await f.caughtUp();
  const prefix = lan.prefix(app);
  // The pinned worker (the old primary's address alone) takes the long jobs first and holds them across the
  // crash; their handlers end once the old primary is back read-only.
  const pinned = await spawnWorker(
    q,
    {
      url: f.oldPrimaryUrl,
      worker: { ...FAILOVER_WORKER, queues: ["stale"], concurrency: STALE, prefetch: 0 },
      sessionSettings: { ...FLEET_SESSION },
    },
    { prefix },
  );
  await until("the pinned worker holds the long jobs", () =>
    counted(q, `queue = 'stale' AND status = 'running'`).then((n) => n === STALE),
  );
  const cron = { expression: "* * * * * *", backfill: 30 };
  const workers: ChildHandle[] = await Promise.all(
    Array.from({ length: WORKERS }, () =>
      spawnWorker(
        q,
        { url: f.workerUrl, worker: { ...FAILOVER_WORKER }, sessionSettings: { ...FLEET_SESSION }, cron },
        { prefix },
      ),
    ),
  );
  const regular = new Set(workers.map((w) => w.pid));

  // A producer beside the drain: which acknowledged enqueues does the new primary have?
  const { Skipq, silentLogger } = await import("../../src/index.js");
  const producer = new Skipq({ connectionString: f.workerUrl, schema: q.schema, logger: silentLogger, poolSize: 2 });
  const acked: Array<{ i: number; t: number }> = [];
  let producing = true;
  const produced = (async () => {
    for (let i = 0; producing; i++) {
      try {
        await producer.enqueue("chaos", { ms: 2, i });
        acked.push({ i, t: Date.now() });
      } catch {
        /* the outage: not acknowledged */
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  await until(
    "a third of the jobs done",
    tolerant(() => counted(q, `queue = 'default' AND status = 'completed'`).then((n) => n >= JOBS / 3)),
    120_000,
    20,
  );
  const doneAtCrash = await counted(q, `queue = 'default' AND status = 'completed'`);
  const killAt = Date.now();
  await f.crash();
  const promotedAt = await f.promoted();
  const detectionMs = promotedAt - killAt;
  // The maintenance leader on the new primary: how soon after the promotion one holds the lease there.
  let leaderAt: number | undefined;
  const leaderWatch = (async () => {
    while (leaderAt === undefined && Date.now() - promotedAt < 60_000) {
      const { rows } = await f.newPrimary
        .query<{ pid: number }>(
          `SELECT split_part(holder, ':', 2)::int AS pid FROM ${s}.leaders WHERE name = 'maintainer' AND expires_at > now()`,
        )
        .catch(() => ({ rows: [] as Array<{ pid: number }> }));
      if (rows[0] && regular.has(rows[0].pid)) leaderAt = Date.now();
      else await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const backAt = await f.comeBack();
  writeFileSync(release, "");
  // Another worker on the failover URL for the long jobs: they are reaped on the new primary and run there.
  const rescuer = await spawnWorker(
    q,
    {
      url: f.workerUrl,
      worker: { ...FAILOVER_WORKER, queues: ["stale"] },
      sessionSettings: { ...FLEET_SESSION },
      maxMs: 200,
    },
    { prefix },
  );

  await until(
    "every job done on the new primary",
    tolerant(() =>
      counted(q, `kind = 'chaos' AND status <> 'completed' AND queue = 'default' AND (payload->>'i') IS NULL`).then(
        (n) => n === 0,
      ),
    ),
    120_000,
    100,
  );
  producing = false;
  await produced;
  await producer.close();
  await until(
    "the produced and the long jobs done too",
    tolerant(() => counted(q, `kind = 'chaos' AND status <> 'completed'`).then((n) => n === 0)),
    60_000,
    100,
  );
  await leaderWatch;

  // The pinned worker, on the old primary back read-only: its outcomes refused (25006), nothing recorded there.
  const refused = /outcomes[^\n]*"code":"25006"|"code":"25006"[^\n]*outcomes/;
  await until(
    "the pinned worker's outcomes refused by the read-only old primary",
    () => refused.test(pinned.stderr()),
    30_000,
    200,
  );
  const { rows: oldStale } = await f.oldPrimary.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'stale' GROUP BY status`,
  );
  const { rows: staleDone } = await q.db.query<{ pid: number }>(
    `SELECT split_part(locked_by, ':', 2)::int AS pid FROM ${s}.all_jobs WHERE queue = 'stale' AND status = 'completed'`,
  );
  const { rows: onOld } = await f.oldPrimary.query<{ name: string }>(
    "SELECT application_name AS name FROM pg_stat_activity WHERE application_name LIKE 'skipq%'",
  );
  const regularOnOld = onOld.filter((r) => {
    const pid = Number(r.name.split(":").at(-1));
    return regular.has(pid) || pid === rescuer.pid;
  });
  const { rows: listeners } = await f.newPrimary.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'skipq:listener'",
  );
  const seen = await ticks(q);

  const exits = workers.filter((w) => w.proc.exitCode !== null || w.proc.signalCode !== null).length;
  for (const w of [...workers, pinned, rescuer]) w.proc.kill("SIGTERM");
  await Promise.all([...workers, pinned, rescuer].map((w) => w.exited));
  const entries = readLedger(q.ledgerDir);
  const r = await reconcile(q.db, q.schema, q.ledgerDir, spec.sync ? [] : [{ t: killAt, what: "failover" }]);

  // Each worker's first claim after the promotion (a claim then can only be on the new primary).
  const firstAfter = (pid: number, e: LedgerEntry["e"], from: number) =>
    entries.find((x) => x.pid === pid && x.e === e && x.t > from && (e !== "listener" || (x as { ok?: boolean }).ok))
      ?.t;
  const resume = [...regular].map((pid) => (firstAfter(pid, "claimed", promotedAt) ?? Number.NaN) - promotedAt);
  const listenerBack = [...regular].map((pid) => (firstAfter(pid, "listener", killAt) ?? Number.NaN) - promotedAt);
  const firstCompletion =
    Math.min(
      ...entries.filter((e) => e.e === "outcome" && e.outcome === "completed" && e.t > promotedAt).map((e) => e.t),
    ) - promotedAt;
  // Duplicates: every job run twice was held at the crash: one of its runs came from a claim made before the
  // promotion (so on the old primary), whether running then, waiting in a prefetch buffer (it may start after
  // another worker's run of the same job: an asynchronous standby never saw that claim), or with its outcome
  // unwritten.
  const heldBefore = new Set(
    entries
      .filter((x) => x.e === "claimed" && x.t < promotedAt)
      .flatMap((x) => (x.ids ?? []).map((id) => `${id}:${x.pid}`)),
  );
  const runs = new Map<string, LedgerEntry[]>();
  for (const e of entries.filter((x) => x.e === "start" && x.id))
    runs.set(e.id as string, [...(runs.get(e.id as string) ?? []), e]);
  // With an asynchronous standby a claim can also be lost after the kill: the postmaster's backends live on for
  // a moment (until they notice its death) and commit locally what the standby never receives. Two runs under
  // the same attempt number mean two claims the new primary did not both see: one was on the old primary.
  const lostClaim = (list: LedgerEntry[]) => new Set(list.map((r) => r.attempt)).size < list.length;
  const unexplained = [...runs.entries()]
    .filter(([, list]) => list.length > 1)
    .filter(([, list]) => !list.some((run) => heldBefore.has(`${run.id}:${run.pid}`)))
    .filter(([, list]) => spec.sync || !lostClaim(list))
    .map(([id]) => id);
  const claimsLostAfterKill = [...runs.values()].filter(
    (list) => list.length > 1 && !list.some((run) => heldBefore.has(`${run.id}:${run.pid}`)) && lostClaim(list),
  ).length;
  const present = new Set(
    (
      await q.db.query<{ i: number }>(`SELECT (payload->>'i')::int AS i FROM ${s}.all_jobs WHERE payload ? 'i'`)
    ).rows.map((x) => x.i),
  );
  // Every acknowledged enqueue, also those acknowledged after the kill (by the dying postmaster's backends).
  const lostAcked = acked.filter((a) => !present.has(a.i));
  const lostTimes = lostAcked.map((a) => a.t - killAt);
  const lossWindowMs = lostAcked.length === 0 ? 0 : Math.max(...lostTimes) - Math.min(...lostTimes);
  const lossSpan =
    lostAcked.length === 0
      ? "none"
      : `acknowledged ${Math.min(...lostTimes)} to ${Math.max(...lostTimes)} ms from the kill`;
  const seconds = seen.map((t) => Date.parse(t) / 1000);
  const doubled = seconds.length - new Set(seconds).size;
  const span = seconds.length === 0 ? 0 : Math.max(...seconds) - Math.min(...seconds) + 1;
  const missed = span - new Set(seconds).size;
  const leaderMs = leaderAt === undefined ? Number.NaN : leaderAt - promotedAt;
  const runMs = Date.now() - startedAt;
  const fmt = (xs: number[]) => xs.map((x) => (Number.isFinite(x) ? String(Math.max(0, x)) : "never")).join(" / ");

  recordRun(
    {
      row: spec.row,
      title: spec.title,
      config: `${spec.config}; ${FAILOVER_CONFIG}`,
      lost: r.lost + (spec.sync ? lostAcked.length : 0),
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      recoveryMs: Math.max(...resume),
      other: `${JOBS.toLocaleString("en")} jobs, ${doneAtCrash.toLocaleString("en")} done at the crash; promoted ${detectionMs} ms after it; first completion on the new primary ${firstCompletion} ms after the promotion; each worker's first claim there ${fmt(resume)} ms (bar ${RESUME_BAR_MS}); LISTEN back ${fmt(listenerBack)} ms (${listeners[0]?.n} listeners on the new primary); leader lease held there ${fmt([leaderMs])} ms after; cron ticks ${seen.length} over ${span} s: missed ${missed}, doubled ${doubled}; acknowledged enqueues lost ${lostAcked.length} of ${acked.length} (${lossSpan}); jobs whose claim was lost after the kill (dying backends, asynchronous tail) and which ran again: ${claimsLostAfterKill}; old primary back read-only ${backAt - promotedAt} ms after the promotion: the pinned worker's outcomes refused (25006), its ${STALE} jobs there still ${oldStale.map((x) => `${x.status} ${x.n}`).join(", ")}; worker exits ${exits}; run ${(runMs / 1000).toFixed(0)} s`,
    },
    {
      lost: r.lost,
      lostAcked: lostAcked.length,
      lossWindowMs,
      claimsLostAfterKill,
      duplicates: r.duplicates,
      promotedMs: detectionMs,
      resumeMs: Math.max(...resume),
      firstCompletionMs: firstCompletion,
      listenerMs: Math.max(...listenerBack),
      leaderMs,
      ticksMissed: missed,
      ticksDoubled: doubled,
      runS: Math.round(runMs / 1000),
    },
  );

  expect(r.lost, `lost: ${r.lostIds.join(",")}`).toBe(0);
  if (spec.sync)
    expect(
      lostAcked.map((a) => a.i),
      "acknowledged enqueues missing on the new primary",
    ).toEqual([]);
  else expect(lossWindowMs, "the asynchronous tail: acknowledged commits lost").toBeLessThan(5000);
  expect(r.attemptsOverMax).toBe(0);
  const explain = unexplained.slice(0, 3).map((id) => ({
    id,
    runs: (runs.get(id) ?? []).map((r) => ({ pid: r.pid, attempt: r.attempt, startFromKill: r.t - killAt })),
    claims: entries
      .filter((x) => x.e === "claimed" && x.ids?.includes(id))
      .map((x) => ({ pid: x.pid, fromKill: x.t - killAt })),
  }));
  expect(
    unexplained,
    `duplicates of jobs not held at the crash (promoted ${detectionMs} ms after the kill): ${JSON.stringify(explain)}`,
  ).toEqual([]);
  expect(exits, "workers that exited").toBe(0);
  for (const ms of resume) expect(ms).toBeLessThan(RESUME_BAR_MS);
  for (const ms of listenerBack) expect(ms).toBeLessThan(RESUME_BAR_MS);
  // The regular workers' and the rescuer's.
  expect(listeners[0]?.n).toBe(WORKERS + 1);
  expect(leaderMs).toBeLessThan(RESUME_BAR_MS);
  expect(doubled).toBe(0);
  expect(missed).toBe(0);
  // Nothing recorded on the old primary after the crash: the long jobs it handed the pinned worker are still
  // running there, and the new primary has them done by other workers.
  if (spec.comesBack === "fenced") expect(oldStale).toEqual([{ status: "running", n: STALE }]);
  expect(staleDone.length).toBe(STALE);
  expect(staleDone.every((x) => x.pid === rescuer.pid)).toBe(true);
  expect(
    regularOnOld.map((x) => x.name),
    "regular workers' sessions on the old primary",
  ).toEqual([]);
  expect(runMs).toBeLessThan(180_000);
}

/** The cron ticks enqueued so far (ISO times from the tick jobs' headers). */
async function ticks(q: ChaosQueue): Promise<string[]> {
  const { rows } = await q.db.query<{ tick: string }>(
    `SELECT split_part(headers->>'skipq-cron', '@', 2) AS tick FROM "${q.schema}".all_jobs WHERE kind = 'tick'`,
  );
  return rows.map((x) => x.tick);
}

describe("primary failover", () => {
  it("N7: the primary SIGKILLed mid-drain, its synchronous standby promoted: workers on a multi-host URL follow it with nothing lost", async () => {
    await runFailover({
      row: "N7",
      title: `fleet failover: primary SIGKILLed at a third of ${JOBS.toLocaleString("en")} jobs (4 workers, cron, a producer), synchronous standby promoted; workers on postgres://db1,db2/…?target_session_attrs=read-write`,
      config: "PostgreSQL 15, streaming replication, synchronous_standby_names = standby, synchronous_commit on",
      sync: true,
      comesBack: "fenced",
      setup: () => manual({ sync: true, vip: false }),
    });
  });

  it("N8: the same with a virtual IP moved to the new primary (vip-manager's way): workers on one address follow it", async () => {
    await runFailover({
      row: "N8",
      title: `fleet failover: primary SIGKILLed at a third of ${JOBS.toLocaleString("en")} jobs, synchronous standby promoted, the virtual IP moved to it (gratuitous ARP); workers on postgres://vip/…`,
      config:
        "PostgreSQL 15, streaming replication, synchronous_standby_names = standby, synchronous_commit on; one address moved",
      sync: true,
      comesBack: "fenced",
      setup: () => manual({ sync: true, vip: true }),
    });
  });

  it("N9: the same with an asynchronous standby: the loss window is measured, and nothing the new primary holds is lost", async () => {
    await runFailover({
      row: "N9",
      title: `fleet failover: primary SIGKILLed at a third of ${JOBS.toLocaleString("en")} jobs, ASYNCHRONOUS standby promoted; workers on a multi-host URL`,
      config: "PostgreSQL 15, asynchronous streaming replication (synchronous_standby_names empty)",
      sync: false,
      comesBack: "fenced",
      setup: () => manual({ sync: false, vip: false }),
    });
  });

  it("N10: pg_auto_failover's monitor detects the dead primary host and promotes its standby: workers on the URI it gives follow", async () => {
    await runFailover({
      row: "N10",
      title: `fleet failover under pg_auto_failover 2.0: the primary's host dies (keeper and PostgreSQL SIGKILLed) at a third of ${JOBS.toLocaleString("en")} jobs; the monitor (a third host) promotes the synchronous standby; workers on the formation's URI`,
      config: `pg_auto_failover monitor settings ${Object.entries(MONITOR_SETTINGS)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ")}; TLS (--ssl-self-signed, sslmode=require)`,
      sync: true,
      comesBack: "standby",
      setup: managed,
    });
  });
});
