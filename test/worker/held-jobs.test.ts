/**
 * HeldJobs (src/worker/heldJobs.ts) without PostgreSQL: every transition of a
 * held job's local life, the races that must change nothing (a heartbeat's
 * verdict, a cancel and a shutdown arriving for one job), and the transitions
 * that are bugs, which throw.
 */
import { expect, test } from "vitest";
import type { ClaimedRow } from "../../src/db/jobStore.js";
import { HeldJobs } from "../../src/worker/heldJobs.js";
import type { Running } from "../../src/worker/types.js";

function row(id: string): ClaimedRow {
  const at = "2026-12-02 10:00:00+00";
  return {
    id,
    queue: "q",
    kind: "k",
    payload: {},
    priority: 0,
    attempts: 1,
    max_attempts: 3,
    lease: `lease-${id}`,
    run_at: at,
    created_at: at,
    headers: null,
    concurrency_key: null,
    locked_at: at,
    on_parent_failure: null,
  };
}

function held() {
  const released: string[] = [];
  const jobs = new HeldJobs((running) => released.push(running.job.id));
  return { jobs, released, claim: (id: string) => jobs.claimed(row(id), undefined, performance.now()) };
}

async function settled(running: Running): Promise<boolean> {
  return Promise.race([running.done.then(() => true), new Promise<boolean>((r) => setImmediate(() => r(false)))]);
}

test("a job runs: buffered, then running, then gone with its outcome to record", async () => {
  const { jobs, claim } = held();
  const job = claim("1");
  expect([job.state, job.started, job.detached, jobs.size]).toEqual(["buffered", false, false, 1]);
  jobs.start(job);
  expect([job.state, job.started]).toEqual(["running", true]);
  expect(jobs.heartbeatable()).toEqual([job]);
  expect(jobs.finish(job)).toBe("record");
  expect([job.state, jobs.size, jobs.has("1")]).toEqual(["finished", 0, false]);
  // The slot settles it when it ends (not finish): drain and runOnce wait on that.
  expect(await settled(job)).toBe(false);
  job.settle();
  expect(await settled(job)).toBe(true);
});

test("a running job whose lease is lost keeps its slot until its handler ends, and ends lease-lost, unrecorded", () => {
  const { jobs, released, claim } = held();
  const job = claim("1");
  jobs.start(job);
  expect(jobs.lose(job, "lease")).toBe(true);
  expect([job.state, job.detached, job.detachedReason]).toEqual(["lost", true, "its lease expired"]);
  expect(jobs.has("1")).toBe(true);
  expect(jobs.heartbeatable()).toEqual([]);
  // A cancel or a shutdown after it changes nothing: the job is not this worker's any more.
  expect(jobs.lose(job, "cancel")).toBe(false);
  expect(jobs.handBack(job)).toBe(false);
  expect(released).toEqual([]);
  expect(jobs.finish(job)).toBe("lease-lost");
  expect(jobs.size).toBe(0);
});

test("a cancelled running job ends cancelled; one handed back at shutdown is released once and ends released", () => {
  const { jobs, released, claim } = held();
  const a = claim("a");
  const b = claim("b");
  jobs.start(a);
  jobs.start(b);
  expect(jobs.lose(a, "cancel")).toBe(true);
  expect(a.detachedReason).toBe("the job was cancelled");
  expect(jobs.handBack(b)).toBe(true);
  expect(jobs.handBack(b)).toBe(false);
  expect(jobs.lose(b, "lease")).toBe(false);
  expect([b.state, b.detachedReason]).toEqual(["handed-back", "it was released at shutdown"]);
  expect(released).toEqual(["b"]);
  // Handed back while running: still held (its handler runs on) until it ends.
  expect(jobs.has("b")).toBe(true);
  expect(jobs.finish(a)).toBe("cancelled");
  expect(jobs.finish(b)).toBe("released");
  expect(released).toEqual(["b"]);
});

test("a buffered job handed back leaves at once, released and settled; one lost in the buffer is discarded unreleased", async () => {
  const { jobs, released, claim } = held();
  const back = claim("back");
  const lost = claim("lost");
  expect(jobs.handBack(back)).toBe(true);
  expect([back.state, back.started, jobs.has("back")]).toEqual(["finished", false, false]);
  expect(released).toEqual(["back"]);
  expect(await settled(back)).toBe(true);
  expect(jobs.lose(lost, "lease")).toBe(true);
  expect(jobs.has("lost")).toBe(true);
  jobs.discard(lost);
  expect([lost.state, jobs.size, released]).toEqual(["finished", 0, ["back"]]);
  expect(await settled(lost)).toBe(true);
});

test("transitions from the wrong state are bugs and throw, changing nothing", () => {
  const { jobs, claim } = held();
  const job = claim("1");
  expect(() => jobs.finish(job)).toThrow(/finish of job 1 in state buffered/);
  expect(() => jobs.discard(job)).toThrow(/discard of job 1 in state buffered, not lost/);
  jobs.start(job);
  expect(() => jobs.start(job)).toThrow(/start of job 1 in state running, not buffered/);
  jobs.lose(job, "lease");
  expect(() => jobs.discard(job)).toThrow(/discard of job 1, which ran/);
  expect(jobs.finish(job)).toBe("lease-lost");
  expect(() => jobs.finish(job)).toThrow(/finish of job 1, which this worker does not hold/);
  expect(jobs.lose(job, "lease")).toBe(false);
  expect(jobs.handBack(job)).toBe(false);
  // A record that is not the one held under its id (a stale copy) is not this worker's either.
  const again = claim("1");
  expect(jobs.lose(job, "cancel")).toBe(false);
  expect(again.state).toBe("buffered");
  expect(() => jobs.start(job)).toThrow(/which this worker does not hold/);
});

test("heartbeats skip jobs completed in the caller's transaction and detached ones", () => {
  const { jobs, claim } = held();
  const [a, b, c] = [claim("a"), claim("b"), claim("c")];
  for (const j of [a, b, c]) jobs.start(j);
  b.completedTx = { xid: "42" };
  jobs.lose(c, "lease");
  expect(jobs.heartbeatable()).toEqual([a]);
});

test("a job leased again while its earlier attempt still runs is held twice, and each hold ends on its own", () => {
  // Its lease ran out under a running handler, the reaper returned it, and a claim of this worker took it again.
  const { jobs, claim } = held();
  const first = claim("6");
  jobs.start(first);
  const again = jobs.claimed({ ...row("6"), lease: "lease-6-again", attempts: 2 }, undefined, performance.now());
  expect([jobs.size, jobs.get("6")]).toEqual([2, again]);
  jobs.start(again);
  // The earlier handler ends first: its outcome is written (and refused by the lease fence); the new hold stays.
  expect(jobs.finish(first)).toBe("record");
  expect([jobs.size, jobs.get("6"), again.state]).toEqual([1, again, "running"]);
  expect(jobs.heartbeatable()).toEqual([again]);
  expect(jobs.finish(again)).toBe("record");
  expect([jobs.size, jobs.has("6")]).toEqual([0, false]);
});

test("when the newer hold of a job ends first, the earlier one still running is its newest again", () => {
  const { jobs, claim } = held();
  const first = claim("7");
  jobs.start(first);
  const again = jobs.claimed({ ...row("7"), lease: "lease-7-again", attempts: 2 }, undefined, performance.now());
  jobs.start(again);
  expect(jobs.finish(again)).toBe("record");
  // A cancel hint names the id: it must still find the hold that runs.
  expect([jobs.size, jobs.get("7")]).toEqual([1, first]);
});
