/**
 * Display properties of the dashboard (fast-check, fixed seed): rows written
 * by plain SQL with arbitrary JSON and text — deep, wide, non-array attempt
 * logs, control characters, the escape text of lone surrogates, huge strings,
 * markup, secrets — in result, progress, attempt_logs, last_error, payload,
 * headers and the keys, shown by the job page (its attempts table too), the jobs list, the dead page,
 * the queue page (and the job page's workflow table) and the live feed. No
 * page answers 5xx, no data reaches a page as raw markup, and no secret the
 * default redactor matches is ever shown.
 */
import fc from "fast-check";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDashboard, type Dashboard } from "../../src/index.js";
import { KEY_SECRET, MARKUP, rowCase, TEXT_SECRET, writeCase } from "../displayRows.js";
import { useTestQueue } from "../helpers.js";

const TOKEN = "properties-token-0123456789";
const t = useTestQueue("display_properties");
let dashboard: Dashboard;
beforeAll(async () => {
  dashboard = createDashboard({ skipq: t.skipq, auth: { token: TOKEN }, env: {} });
});
afterAll(async () => {
  await dashboard.close();
});

const get = (path: string) =>
  dashboard.fetch(new Request(`http://127.0.0.1${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }), {
    remoteAddress: "127.0.0.1",
  });

/** The first `job` event of a live stream watching `id`: its data lines. */
async function liveEvent(id: string): Promise<string[]> {
  const res = await get(`/events?jobs=${id}`);
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  const decoder = new TextDecoder();
  while (!/event: job\ndata: .*\n\n/.test(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  await reader.cancel();
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice(6));
}

test("every dashboard page and the live feed show any row PostgreSQL accepts: no 5xx, escaped markup, no secret (property)", async () => {
  let n = 0;
  await fc.assert(
    fc.asyncProperty(rowCase, async (c) => {
      n++;
      const queue = `prop${n}`;
      const { live, dead } = await writeCase(t, queue, n, c);
      for (const path of [
        `/jobs/${live}`,
        `/jobs/${dead}`,
        `/jobs?queue=${queue}`,
        `/dead?queue=${queue}`,
        `/queues/${queue}`,
      ]) {
        const res = await get(path);
        expect(res.status, path).toBe(200);
        const page = await res.text();
        expect(page, path).not.toContain(MARKUP);
        expect(page, path).not.toContain(KEY_SECRET);
        expect(page, path).not.toContain(TEXT_SECRET);
        // The job page's attempts table reads the same attempt logs (worker, times, outcome, error).
        if (path.startsWith("/jobs/")) expect(page, path).toMatch(/<(table|p class="muted") id="attempts"/);
      }
      if (n % 6 === 1) {
        for (const data of await liveEvent(live)) {
          expect(() => JSON.parse(data)).not.toThrow();
          expect(data).not.toContain(TEXT_SECRET);
        }
      }
    }),
    { seed: 20_211, numRuns: 60, endOnFailure: true },
  );
}, 120_000);
