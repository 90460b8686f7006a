/**
 * A client for a replicated cluster (docs/deployment.md, "High availability"):
 * every host in libpq's syntax, writes and claims on the one that takes writes
 * (target_session_attrs=read-write), reads that may lag on a standby when one
 * answers (prefer-standby). CLUSTER_HOSTS lists the hosts, e.g.
 * "db1:5432,db2:5432"; by default a host that refuses (127.0.0.1:1) and then
 * the one in DATABASE_URL, so the example runs against a single server too.
 * Run: DATABASE_URL=postgres://… [CLUSTER_HOSTS=h1:5432,h2:5432] node --import tsx examples/high-availability.ts
 */
import { Admin, Skipq } from "skipq";

const single = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const hosts = process.env.CLUSTER_HOSTS ?? `127.0.0.1:1,${single.host}`;
const cluster = (attrs: string) =>
  `postgres://${single.username}${single.password ? `:${single.password}` : ""}@${hosts}${single.pathname}?target_session_attrs=${attrs}&connect_timeout=2`;

const skipq = new Skipq({
  connectionString: cluster("read-write"), // each new connection finds the primary again after a failover
  readConnectionString: cluster("prefer-standby"), // Admin reads, stats, the dashboard's pages, metrics
  schema: process.env.SKIPQ_SCHEMA ?? "skipq",
  poolSize: 2,
});
await skipq.migrate();

const worker = skipq.worker({ concurrency: 2, lockTimeout: "30s" }); // keep the lease above your failover time
let done = 0;
worker.register("ping", async () => {
  done++;
});
await worker.start();
await skipq.enqueue("ping", {});
while (done < 1) await new Promise((resolve) => setTimeout(resolve, 20));

const replica = await new Admin(skipq).replica();
console.log(
  replica?.standby
    ? `reads from standby ${replica.server}, ${replica.lagBytes} bytes behind`
    : `reads from ${replica?.server} (a primary: no standby answered)`,
);
console.log(`ran ${done} job on the primary`);
await worker.stop();
await skipq.close();
