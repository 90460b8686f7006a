/**
 * The fleet bench (`npm run bench -- --fleet [--quick] [--out file.md]`, issue 17): drains of
 * no-op jobs by 1, 2 and 4 "hosts" (network namespaces on veth pairs, 198.18.0.0/15) × 2 worker
 * processes, each process's pool either direct or through PgBouncer in transaction mode (its LISTEN
 * direct), with the peak number of server connections; then one host's per-process rate on loopback
 * against the same through a proxy adding 2 ms of round trip.
 *
 * It owns everything it uses: an embedded PostgreSQL, a PgBouncer, the namespaces, the worker
 * processes; all are removed at the end, on failure too. Needs root, iproute2 and pgbouncer.
 * Prints a table and writes it as section 13 of bench/RESULTS.md (or --out).
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { EmbeddedPostgres } from "../src/embedded/embeddedPostgres.js";
import { Skipq, silentLogger } from "../src/index.js";
import { type Bouncer, startBouncer } from "../test/chaos/bouncer.js";
import { ChaosProxy } from "../test/chaos/proxy.js";
import { type DrainChild, killDrainChildren, spawnDrainChild } from "../test/fleet/children.js";
import { Fleet, type Host, namespacesUnavailable } from "../test/fleet/net.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const PROCESSES_PER_HOST = 2;
const WORKER = { concurrency: 10, pollInterval: "200ms" };

interface Row {
  setup: string;
  processes: number;
  jobs: number;
  seconds: number;
  peakConnections: number;
}

function parse(argv: string[]): { quick: boolean; out: string } {
  let quick = false;
  let out = path.join(here, "RESULTS.md");
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--quick") quick = true;
    else if (arg === "--out") out = path.resolve(argv[++i] ?? "");
    else if (arg.startsWith("--out=")) out = path.resolve(arg.slice(6));
    else throw new Error(`unknown argument ${arg} for --fleet (it takes --quick and --out)`);
  }
  return { quick, out };
}

export async function runFleetBench(argv: string[]): Promise<void> {
  const { quick, out } = parse(argv);
  const unavailable = namespacesUnavailable();
  if (unavailable) throw new Error(`the fleet bench cannot run here: ${unavailable}`);
  const jobs = quick ? 20_000 : 200_000;
  const fleet = new Fleet();
  let server: EmbeddedPostgres | undefined;
  let bouncer: Bouncer | undefined;
  let proxy: ChaosProxy | undefined;
  const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-fleet-bench-"));
  const started = Date.now();
  const rows: Row[] = [];
  try {
    const hosts = fleet.addHosts(4, 40);
    chmodSync(dir, 0o755);
    const hba = path.join(dir, "pg_hba.conf");
    writeFileSync(hba, "host all all 127.0.0.1/32 trust\nhost all all 198.18.0.0/15 trust\n");
    chmodSync(hba, 0o644);
    server = new EmbeddedPostgres({
      settings: {
        listen_addresses: ["127.0.0.1", ...fleet.serverAddresses].join(","),
        hba_file: hba,
        max_connections: "100",
        synchronous_commit: "off",
      },
    });
    await server.start();
    bouncer = await startBouncer(
      server.port,
      {
        listen_addr: ["127.0.0.1", ...fleet.serverAddresses].join(","),
        default_pool_size: 20,
        max_client_conn: 1000,
      },
      "postgres",
    );
    const bouncerPort = Number(new URL(bouncer.url).port);
    const db = new pg.Pool({ connectionString: server.url, max: 3 });
    db.on("error", () => undefined);
    const direct = (h: Host) => `postgres://postgres@${h.serverAddress}:${server?.port}/postgres`;
    const pooled = (h: Host) => `postgres://postgres@${h.serverAddress}:${bouncerPort}/postgres`;

    for (const mode of ["direct", "PgBouncer"] as const) {
      for (const count of [1, 2, 4]) {
        const used = hosts.slice(0, count);
        const row = await drain(db, server.url, jobs, `${count} host${count > 1 ? "s" : ""} × 2, ${mode}`, (schema) =>
          used.flatMap((h) =>
            Array.from({ length: PROCESSES_PER_HOST }, () =>
              spawnDrainChild(
                mode === "direct"
                  ? { url: direct(h), schema, worker: WORKER }
                  : {
                      url: pooled(h),
                      schema,
                      preparedStatements: false,
                      sessionSettings: false,
                      worker: { ...WORKER, listenConnectionString: direct(h) },
                    },
                fleet.prefix(h),
              ),
            ),
          ),
        );
        rows.push(row);
        console.log(format([row]).at(-1));
      }
    }
    // PgBouncer's idle server connections would count in the next rows' peaks.
    await bouncer.stop();
    bouncer = undefined;
    // Round trip: one host's two processes on loopback, then through a proxy adding 1 ms each way.
    proxy = new ChaosProxy(server.port);
    await proxy.start();
    const viaProxy = proxy.url(server.url);
    const rttJobs = quick ? 10_000 : 50_000;
    for (const [label, url, latency] of [
      ["loopback", server.url, 0],
      ["loopback + 2 ms RTT (proxy)", viaProxy, 1],
      ["loopback through the proxy, no delay", viaProxy, 0],
    ] as const) {
      proxy.latencyMs = latency;
      const row = await drain(db, server.url, rttJobs, `1 host × 2, ${label}`, (schema) =>
        Array.from({ length: PROCESSES_PER_HOST }, () => spawnDrainChild({ url, schema, worker: WORKER })),
      );
      rows.push(row);
      console.log(format([row]).at(-1));
    }
    await db.end();
  } finally {
    await killDrainChildren();
    await proxy?.close();
    await bouncer?.stop();
    await server?.stop();
    fleet.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  const minutes = (Date.now() - started) / 60_000;
  const section = render(rows, jobs, quick, minutes);
  console.log(`\n${section}`);
  writeSection(out, section);
  console.log(`wrote section 13 of ${out} (${minutes.toFixed(1)} min)`);
}

/** One drain: a fresh schema, the processes started and ready, then `jobs` no-op jobs inserted at once. */
async function drain(
  db: pg.Pool,
  url: string,
  jobs: number,
  setup: string,
  start: (schema: string) => DrainChild[],
): Promise<Row> {
  const schema = `fleet_bench_${Math.random().toString(36).slice(2, 8)}`;
  const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
  await skipq.migrate();
  await skipq.close();
  const children = start(schema);
  await Promise.all(children.map((c) => c.ready));
  let peak = 0;
  const sample = async () => {
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'",
    );
    peak = Math.max(peak, rows[0].n);
  };
  const sampler = setInterval(() => void sample().catch(() => undefined), 100);
  await db.query(
    `INSERT INTO "${schema}".jobs (kind, payload) SELECT 'chaos', '{}'::jsonb FROM generate_series(1, $1)`,
    [jobs],
  );
  const t0 = performance.now();
  await db.query(`NOTIFY "${schema}", 'default'`).catch(() => undefined);
  for (;;) {
    const { rows } = await db.query(`SELECT EXISTS (SELECT 1 FROM "${schema}".jobs) AS left`);
    if (!rows[0].left) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  await sample().catch(() => undefined);
  const reports = await Promise.all(children.map((c) => c.stop()));
  const errors = reports.flatMap((r) => r.errors ?? []);
  if (errors.length > 0)
    console.log(`  ${setup}: database errors in the workers: ${JSON.stringify(errors.slice(0, 3))}`);
  await db.query(`DROP SCHEMA "${schema}" CASCADE`);
  return { setup, processes: children.length, jobs, seconds, peakConnections: peak };
}

function format(rows: Row[]): string[] {
  const lines = [
    "| setup | processes | jobs | drain (s) | jobs/s | per process (jobs/s) | peak server connections |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    const rate = r.jobs / r.seconds;
    lines.push(
      `| ${r.setup} | ${r.processes} | ${r.jobs.toLocaleString("en")} | ${r.seconds.toFixed(1)} | ${Math.round(rate).toLocaleString("en")} | ${Math.round(rate / r.processes).toLocaleString("en")} | ${r.peakConnections} |`,
    );
  }
  return lines;
}

function render(rows: Row[], jobs: number, quick: boolean, minutes: number): string {
  const loop = rows.find((r) => r.setup.endsWith("loopback"));
  const slow = rows.find((r) => r.setup.includes("2 ms RTT"));
  const share = loop && slow ? `${Math.round((100 * (slow.jobs / slow.seconds)) / (loop.jobs / loop.seconds))} %` : "—";
  return [
    `## 13. Fleet: ${jobs.toLocaleString("en")} no-op jobs by 1, 2 and 4 hosts × 2 worker processes, direct and through PgBouncer; 2 ms of added round trip`,
    "",
    `Generated by \`npm run bench -- --fleet${quick ? " --quick" : ""}\` on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC in ${minutes.toFixed(1)} min; Node ${process.version}, ${os.cpus().length} CPUs (every host, PostgreSQL and PgBouncer share them: more hosts add processes, not CPUs). Hosts are network namespaces on veth pairs; PostgreSQL (embedded, synchronous_commit off, max_connections 100) and PgBouncer 1.18 (transaction mode, default_pool_size 20) listen on the root side. Each process: concurrency 10, default prefetch, poll 200 ms, a pool of 5 and a direct LISTEN connection (through PgBouncer: prepared statements and session settings off). The clock starts when the jobs' INSERT commits and stops when none is left. Peak server connections: client backends sampled every 100 ms, the bench's own (1–3) included; through PgBouncer they are its server pool plus one direct LISTEN per process. The round-trip rows run in the root namespace, through test/chaos/proxy.ts (it adds 1 ms to every chunk each way); the proxy without delay isolates its own cost.`,
    "",
    ...format(rows),
    "",
    `Per-process rate with 2 ms of added round trip: ${share} of loopback's.`,
  ].join("\n");
}

/** Replaces section 13 of `file` (or appends it), leaving every other section as it is. */
function writeSection(file: string, section: string): void {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "# skipq benchmark results\n";
  const parts = text.split(/\n(?=## \d+\. )/);
  const kept = parts.filter((p, i) => i === 0 || !p.startsWith("## 13. "));
  writeFileSync(file, `${[...kept.map((p) => p.trimEnd()), section].join("\n\n")}\n`);
}
