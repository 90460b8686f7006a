/**
 * Scenario 9: the outbox relay against the broker floor. The floor is what the
 * broker's own client library reaches publishing the same messages with the
 * same confirmation (RabbitMQ publisher confirms, JetStream PubAck, a 2xx),
 * pipelined as a good client would (a window of confirms in flight); the relay
 * is measured from a filled outbox to the last delivered mark, through the
 * public API (`Outbox.relay`, default options) of the built package.
 * Peers have no outbox, so the comparison is to the floor. Invariant: a
 * destination that is not reachable says so instead of printing a number, and
 * a relay rate is printed only when the destination holds every event.
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import pg from "pg";
import type { OutboxSink, RelayOptions } from "skipq";
import * as skipqPackage from "skipq";
import { median, waitFor } from "./lib.js";

/** The skipq build measured: this package, or (for a before/after comparison) another build of it. */
export type Lib = Pick<
  typeof skipqPackage,
  "Skipq" | "Outbox" | "silentLogger" | "rabbitmqSink" | "natsSink" | "webhookSink"
>;

export interface OutboxSizes {
  /** Events over 100 keys (interleaved, as 100 busy aggregates publish them). */
  manyKeys: number;
  /** Events on one key. */
  oneKey: number;
  /** Messages per floor measurement. */
  floor: number;
  reps: number;
  /** A relay run stops here and reports its rate over what it delivered. */
  limitMs: number;
}

/** A relay set-up to measure: a skipq build and relay options (besides the sink). */
export interface RelayVariant {
  label: string;
  lib: Lib;
  options: Omit<RelayOptions, "sink">;
}

/** One destination × relay variant: medians over the reps of the rates, and of each rep's ratio to that rep's floor. */
export interface OutboxRow {
  target: string;
  variant: string;
  floor?: number;
  /** The floor's confirmation window, or why the destination was not measured. */
  floorNote: string;
  manyKeys?: number;
  manyKeysShare?: number;
  oneKey?: number;
  oneKeyShare?: number;
  note: string;
}

/** The event body every measurement sends (the floor and the relay alike). */
const eventBody = (n: number, key: string) => ({ n, order: key, status: "paid", amount: 4200 });

interface Target {
  name: string;
  /** Confirmation windows the floor tries (its best median is the floor). */
  windows: number[];
  /** Null when usable, else why not. */
  setup(): Promise<string | null>;
  /** Empties the destination between measurements. */
  reset(): Promise<void>;
  /** Publishes up to `n` messages (fewer past `deadline`) straight through the client library, at most `window` unconfirmed at a time; resolves with how many. */
  floor(n: number, window: number, deadline: number): Promise<number>;
  sink(lib: Lib): OutboxSink;
  /** Messages the destination holds now. */
  count(): Promise<number>;
  close(): Promise<void>;
}

/** True when something accepts TCP connections at host:port within 1 s. */
function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("timeout", () => done(false));
    socket.once("error", () => done(false));
  });
}

/**
 * Runs `send(i, confirmed)` for i < n with at most `window` unconfirmed, stopping early at
 * `deadline` (Date.now()); resolves with how many were sent, once all of them are confirmed.
 */
async function pipelined(
  n: number,
  window: number,
  deadline: number,
  send: (i: number, confirmed: (error?: unknown) => void) => void | Promise<void>,
): Promise<number> {
  let inFlight = 0;
  let done = 0;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const confirmed = (error?: unknown) => {
    inFlight--;
    done++;
    if (error && failure === undefined) failure = error;
    wake?.();
  };
  const waitOne = () =>
    new Promise<void>((resolve) => {
      wake = resolve;
    });
  let sent = 0;
  for (let i = 0; i < n; i++) {
    while (inFlight >= window) await waitOne();
    if (i % 100 === 0 && Date.now() > deadline) break;
    if (failure !== undefined) throw failure;
    inFlight++;
    // Only wait when the client asks to (backpressure): yielding after every send would let
    // the client flush one message per write.
    sent++;
    const wait = send(i, confirmed);
    if (wait) await wait;
  }
  while (done < sent) await waitOne();
  if (failure !== undefined) throw failure;
  return sent;
}

function rabbitTarget(url: string, tag: string): Target {
  const exchange = `skipq-bench-${tag}`;
  const queue = `skipq-bench-${tag}`;
  // biome-ignore lint/suspicious/noExplicitAny: amqplib is an optional peer; only the calls below are used.
  let connection: any;
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  let channel: any;
  return {
    name: "RabbitMQ",
    windows: [100, 1000],
    async setup() {
      const parsed = new URL(url);
      if (!(await reachable(parsed.hostname, Number(parsed.port || 5672)))) return `nothing at ${parsed.host}`;
      const amqp = await import("amqplib");
      connection = await amqp.connect(url);
      channel = await connection.createConfirmChannel();
      // A durable queue bound to the exchange: persistent messages are confirmed once written, as in production.
      await channel.assertExchange(exchange, "topic", { durable: true });
      await channel.assertQueue(queue, { durable: true });
      await channel.bindQueue(queue, exchange, "#");
      return null;
    },
    async reset() {
      await channel.purgeQueue(queue);
    },
    floor: (n, window, deadline) =>
      pipelined(n, window, deadline, (i, confirmed) => {
        const key = `k${i % 100}`;
        const ok = channel.publish(
          exchange,
          "orders",
          Buffer.from(JSON.stringify(eventBody(i, key))),
          {
            persistent: true,
            contentType: "application/json",
            messageId: String(i),
            headers: { "x-skipq-key": key, "x-skipq-topic": "orders" },
          },
          (error: unknown) => confirmed(error),
        );
        return ok ? undefined : once(channel, "drain").then(() => undefined);
      }),
    sink: (lib) => lib.rabbitmqSink({ url, exchange, assertExchange: false }),
    async count() {
      return (await channel.checkQueue(queue)).messageCount;
    },
    async close() {
      await channel?.deleteQueue(queue).catch(() => undefined);
      await channel?.deleteExchange(exchange).catch(() => undefined);
      await connection?.close().catch(() => undefined);
    },
  };
}

function natsTarget(servers: string, tag: string): Target {
  const stream = `skipq_bench_${tag}`;
  const subject = `skipqbench.${tag}`;
  // biome-ignore lint/suspicious/noExplicitAny: nats is an optional peer; only the calls below are used.
  let nats: any;
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  let nc: any;
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  let jsm: any;
  // biome-ignore lint/suspicious/noExplicitAny: as above.
  let js: any;
  let round = 0;
  return {
    name: "NATS JetStream",
    windows: [100, 1000],
    async setup() {
      const [host, port] = servers.split(":");
      if (!(await reachable(host ?? "127.0.0.1", Number(port ?? 4222)))) return `nothing at ${servers}`;
      nats = await import("nats");
      nc = await nats.connect({ servers });
      jsm = await nc.jetstreamManager();
      // File storage (the default): a PubAck means the stream stored the message.
      await jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
      js = nc.jetstream();
      return null;
    },
    async reset() {
      await jsm.streams.purge(stream);
      round++;
    },
    floor: (n, window, deadline) =>
      pipelined(n, window, deadline, (i, confirmed) => {
        const key = `k${i % 100}`;
        const h = nats.headers();
        h.set("x-skipq-key", key);
        h.set("x-skipq-topic", "orders");
        js.publish(`${subject}.orders`, new TextEncoder().encode(JSON.stringify(eventBody(i, key))), {
          // A fresh id per round: the stream's duplicate window would drop a repeated one.
          msgID: `floor:${round}:${i}`,
          headers: h,
        }).then(
          () => confirmed(),
          (error: unknown) => confirmed(error),
        );
      }),
    // A fresh message-id prefix per round, for the same reason.
    sink: (lib) =>
      lib.natsSink({ servers, subject: (e) => `${subject}.${e.topic}`, messageIdPrefix: `relay:${round}:` }),
    async count() {
      return (await jsm.streams.info(stream)).state.messages;
    },
    async close() {
      await jsm?.streams.delete(stream).catch(() => undefined);
      await nc?.close().catch(() => undefined);
    },
  };
}

/** A local receiver answering 200 to every POST (in this process, so it shares the CPU with the relay). */
function webhookTarget(): Target {
  let server: http.Server | undefined;
  let url = "";
  let received = 0;
  const secret = "bench-secret-0123456789";
  return {
    name: "webhook (local receiver)",
    // Concurrent requests, one connection each (the relay sends up to batchSize = 100 at once);
    // at 1,000 the local receiver reset connections.
    windows: [10, 100],
    async setup() {
      server = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          received++;
          res.writeHead(200).end();
        });
      });
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      return null;
    },
    async reset() {
      received = 0;
    },
    floor: (n, window, deadline) =>
      pipelined(n, window, deadline, (i, confirmed) => {
        const key = `k${i % 100}`;
        fetch(url, {
          method: "POST",
          body: JSON.stringify({ id: String(i), topic: "orders", key, event: eventBody(i, key) }),
          headers: { "content-type": "application/json" },
        })
          .then((r) => r.arrayBuffer().then(() => confirmed(r.ok ? undefined : new Error(String(r.status)))))
          .catch(confirmed);
      }),
    sink: (lib) => lib.webhookSink({ url, secret }),
    async count() {
      return received;
    },
    async close() {
      server?.closeAllConnections();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    },
  };
}

/**
 * The outbox scenario: per destination and rep, the floor (the best of its
 * confirmation windows) and then each relay variant over 100 keys and on one
 * key, so every ratio compares figures taken moments apart; medians over reps.
 */
export async function runOutboxBench(options: {
  databaseUrl: string;
  rabbitUrl: string;
  natsServers: string;
  tag: string;
  sizes: OutboxSizes;
  log: (message: string) => void;
  /** Default: this package's relay with its default options. */
  variants?: RelayVariant[];
  /** Receives a function that drops what this run created, for a run stopped by a signal. */
  onInterrupt?: (drop: () => Promise<void>) => void;
}): Promise<OutboxRow[]> {
  const { sizes, log } = options;
  const variants = options.variants ?? [{ label: "skipq relay, defaults", lib: skipqPackage, options: {} }];
  const schema = `bench_outbox_${options.tag}`;
  const admin = new pg.Pool({ connectionString: options.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  const handles = variants.map((variant) => {
    const skipq = new variant.lib.Skipq({
      connectionString: options.databaseUrl,
      schema,
      logger: variant.lib.silentLogger,
    });
    return { variant, skipq, outbox: new variant.lib.Outbox(skipq) };
  });
  const rows: OutboxRow[] = [];
  const targets = [
    rabbitTarget(options.rabbitUrl, options.tag),
    natsTarget(options.natsServers, options.tag),
    webhookTarget(),
  ];
  options.onInterrupt?.(async () => {
    for (const target of targets) await target.close().catch(() => undefined);
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  });
  try {
    await handles[0]?.skipq.migrate();
    for (const target of targets) {
      let unavailable: string | null;
      try {
        unavailable = await target.setup();
      } catch (error) {
        unavailable = `setup failed: ${error instanceof Error ? error.message : String(error)}`;
      }
      if (unavailable) {
        for (const { variant } of handles) {
          rows.push({ target: target.name, variant: variant.label, floorNote: unavailable, note: "" });
        }
        log(`outbox ${target.name}: ${unavailable}`);
        await target.close().catch(() => undefined);
        continue;
      }
      try {
        rows.push(...(await measureTarget(target, handles, admin, schema, sizes, log)));
      } catch (error) {
        const why = `failed: ${error instanceof Error ? error.message : String(error)}`;
        log(`outbox ${target.name}: ${why}`);
        for (const { variant } of handles)
          rows.push({ target: target.name, variant: variant.label, floorNote: why, note: "" });
      } finally {
        await target.close().catch(() => undefined);
      }
    }
  } finally {
    for (const { skipq } of handles) await skipq.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
  return rows;
}

type Handle = { variant: RelayVariant; outbox: InstanceType<Lib["Outbox"]> };

async function measureTarget(
  target: Target,
  handles: Handle[],
  admin: pg.Pool,
  schema: string,
  sizes: OutboxSizes,
  log: (message: string) => void,
): Promise<OutboxRow[]> {
  const floors: number[] = [];
  const windowWins = new Map<number, number>();
  const results = handles.map(() => ({
    many: [] as number[],
    one: [] as number[],
    manyRates: [] as number[],
    oneRates: [] as number[],
    notes: new Set<string>(),
  }));
  for (let rep = 0; rep < sizes.reps; rep++) {
    let floor = 0;
    let best = 0;
    const tried: string[] = [];
    for (const window of target.windows) {
      await target.reset();
      const t0 = performance.now();
      // Bounded like the relay runs (a third of their bound per window), so a slow destination stays cheap.
      let rate = 0;
      try {
        const sent = await target.floor(sizes.floor, window, Date.now() + sizes.limitMs / 3);
        rate = sent / ((performance.now() - t0) / 1000);
      } catch (error) {
        tried.push(`window ${window} failed: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      tried.push(`window ${window}: ${Math.round(rate)}`);
      if (rate > floor) [floor, best] = [rate, window];
    }
    if (floor === 0) throw new Error(`no floor (${tried.join("; ")})`);
    floors.push(floor);
    windowWins.set(best, (windowWins.get(best) ?? 0) + 1);
    log(`outbox floor ${target.name} rep ${rep + 1}: ${tried.join(", ")}`);
    for (const [i, handle] of handles.entries()) {
      const result = results[i] as (typeof results)[number];
      for (const [keys, total, shares, rates] of [
        [100, sizes.manyKeys, result.many, result.manyRates],
        [1, sizes.oneKey, result.one, result.oneRates],
      ] as const) {
        const { rate, note } = await relayOnce(target, handle, admin, schema, keys, total, sizes.limitMs);
        if (note) result.notes.add(note);
        if (rate !== undefined) {
          shares.push(rate / floor);
          rates.push(rate);
        }
        log(
          `outbox relay ${target.name} ${handle.variant.label} rep ${rep + 1}, ${keys} key(s): ${rate === undefined ? note : `${Math.round(rate)}/s (${Math.round((100 * rate) / floor)}% of the floor)`}`,
        );
      }
    }
  }
  const floor = median(floors);
  const window = [...windowWins].sort((a, b) => b[1] - a[1])[0]?.[0];
  return handles.map(({ variant }, i) => {
    const result = results[i] as (typeof results)[number];
    // Only when every rep measured (a destination missing events gives no figure).
    const all = (values: number[]) => (values.length === sizes.reps ? median(values) : undefined);
    return {
      target: target.name,
      variant: variant.label,
      floor,
      floorNote: `window ${window}`,
      manyKeys: all(result.manyRates),
      manyKeysShare: all(result.many),
      oneKey: all(result.oneRates),
      oneKeyShare: all(result.one),
      note: [...result.notes].join("; "),
    };
  });
}

/**
 * One relay run: `total` events over `keys` keys, from a filled outbox to the last delivered mark.
 * The rate is undefined when the destination does not hold every event marked delivered.
 */
async function relayOnce(
  target: Target,
  { variant, outbox }: Handle,
  admin: pg.Pool,
  schema: string,
  keys: number,
  total: number,
  limitMs: number,
): Promise<{ rate?: number; note?: string }> {
  const perKey = Math.ceil(total / keys);
  await admin.query(`TRUNCATE "${schema}".outbox`);
  // Interleaved like real publishers (key 1's n-th event, key 2's n-th, …); ids follow that order.
  await admin.query(
    `INSERT INTO "${schema}".outbox (topic, key, event)
     SELECT 'orders', 'k' || k, jsonb_build_object('n', n, 'order', 'k' || k, 'status', 'paid', 'amount', 4200)
       FROM generate_series(1, $1::int) n, generate_series(1, $2::int) k ORDER BY n, k`,
    [perKey, keys],
  );
  await admin.query(`VACUUM ANALYZE "${schema}".outbox`);
  const sink = target.sink(variant.lib);
  // Connect before the clock starts, as the floor does.
  await sink.deliver(
    { id: "0", topic: "warmup", key: "warmup", event: {}, headers: {}, attempt: 1, createdAt: new Date() },
    AbortSignal.timeout(5000),
  );
  await target.reset();
  const relay = outbox.relay({ ...variant.options, sink });
  const n = perKey * keys;
  const t0 = performance.now();
  relay.start();
  const done = await waitFor(() => relay.stats.delivered >= n, Date.now() + limitMs);
  const ms = performance.now() - t0;
  const delivered = relay.stats.delivered;
  await relay.stop();
  const held = await waitForCount(target, delivered);
  if (held < delivered)
    return { note: `${keys} key(s): the destination holds ${held} of ${delivered} marked delivered` };
  return {
    rate: delivered / (ms / 1000),
    note: done
      ? undefined
      : `${keys} key(s): stopped at the ${limitMs / 1000} s bound (rate over the events delivered)`,
  };
}

/** The destination's count, once it stops growing towards `n` (a broker may count a confirmed message a moment late). */
async function waitForCount(target: Target, n: number): Promise<number> {
  let held = await target.count();
  const deadline = Date.now() + 5000;
  while (held < n && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    held = await target.count();
  }
  return held;
}
