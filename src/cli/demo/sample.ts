/**
 * The demo's options and sample work: a seeded mix of job kinds, payloads, priorities and
 * delays, and the handler that simulates them (some fail once, a few always,
 * card declines fail permanently). Deterministic for a given count.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { FailPermanently } from "../../core/errors.js";
import type { BulkItem } from "../../skipq.js";
import type { JobContext } from "../../worker/worker.js";

export const QUEUES = ["default", "payments", "reports"];

export interface DemoOptions {
  /** How many sample jobs to enqueue. */
  jobs: number;
  /** Handlers running at once. */
  concurrency: number;
  /** After the run, keep the embedded database up until Ctrl-C. */
  keep: boolean;
  /** The configured database; undefined starts an embedded one. */
  connectionString: string | undefined;
  /** Schema to use; undefined picks "skipq" (embedded) or "skipq_demo" (a user's database). */
  schema: string | undefined;
  /** Whether a `dashboard` command is installed, for the hints. */
  hasDashboard: boolean;
  /** How to invoke this CLI in hints, e.g. "node bin/skipq.js". */
  self: string;
}

type Simulate = "ok" | "fail-once" | "fail-always" | "decline";

export interface SamplePayload {
  simulate: Simulate;
  ms: number;
  [field: string]: unknown;
}

/** Small, seeded PRNG (mulberry32) so every run generates the same sample. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Sample {
  items: BulkItem<SamplePayload>[];
  /** Jobs that end dead by design (declined cards, a CRM that never answers). */
  expectedDead: number;
  /** Jobs that fail at least once. */
  expectedRetried: number;
  delayed: number;
}

/** The sample workload: five kinds over three queues, deterministic for a given size. */
export function sampleJobs(count: number): Sample {
  const next = random(42);
  const items: BulkItem<SamplePayload>[] = [];
  let expectedDead = 0;
  let expectedRetried = 0;
  let delayed = 0;
  for (let i = 0; i < count; i++) {
    const pick = next();
    const roll = next();
    const ms = 1 + Math.floor(next() * 4);
    if (pick < 0.4) {
      const simulate: Simulate = roll < 0.04 ? "fail-once" : "ok";
      if (simulate !== "ok") expectedRetried++;
      items.push({ job: "send-email", payload: { simulate, ms, to: `user${i}@example.com` }, priority: 0 });
    } else if (pick < 0.65) {
      items.push({
        job: "resize-image",
        payload: { simulate: "ok", ms, image: `photo-${i}.jpg`, width: 320 },
        priority: 5,
      });
    } else if (pick < 0.8) {
      const simulate: Simulate = roll < 0.005 ? "decline" : roll < 0.065 ? "fail-once" : "ok";
      if (simulate === "decline") expectedDead++;
      if (simulate === "fail-once") expectedRetried++;
      items.push({
        job: "charge-card",
        queue: "payments",
        payload: { simulate, ms, order: 10_000 + i, cents: 500 + (i % 9000) },
        priority: 10,
        maxAttempts: 5,
      });
    } else if (pick < 0.92) {
      const simulate: Simulate = roll < 0.05 ? "fail-always" : "ok";
      if (simulate === "fail-always") {
        expectedDead++;
        expectedRetried++;
      }
      items.push({ job: "sync-crm", payload: { simulate, ms, contact: i }, priority: -5, maxAttempts: 3 });
    } else {
      delayed++;
      items.push({
        job: "generate-report",
        queue: "reports",
        payload: { simulate: "ok", ms: ms * 5, report: `weekly-${i}` },
        delay: 1000 + Math.floor(next() * 3000),
      });
    }
  }
  return { items, expectedDead, expectedRetried, delayed };
}

const FAILURES: Record<string, string> = {
  "send-email": "SMTP 451 4.7.1 temporary failure, try again later",
  "charge-card": "payment gateway timed out after 3000 ms",
  "sync-crm": "CRM API answered 503 Service Unavailable",
};

/** The demo's handler for every kind: waits a few ms, then does what the payload says. */
export async function simulate(payload: SamplePayload, ctx: JobContext<SamplePayload>): Promise<void> {
  await sleep(payload.ms, undefined, { signal: ctx.signal });
  const message = FAILURES[ctx.job.kind] ?? "simulated failure";
  switch (payload.simulate) {
    case "fail-once":
      if (ctx.attempt === 1) throw new Error(message);
      return;
    case "fail-always":
      throw new Error(message);
    case "decline":
      throw new FailPermanently("card declined: insufficient funds");
    default:
      return;
  }
}
