/**
 * Outbox test helpers: a local webhook receiver that verifies signatures, and
 * the per-key "in order, at least once" check used by the crash and broker tests.
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect, type TestContext } from "vitest";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyWebhook } from "../../src/index.js";

export const SECRET = "test-secret-0123456789";

/** A local webhook receiver: records verified bodies; `answer` decides the status code. */
export async function webhookServer(
  answer: (body: { key: string; event: { n: number } }) => number = () => 200,
  /** Latency added to every answer, to stand in for a remote receiver. */
  latencyMs = 0,
) {
  const received: Array<{ id: string; key: string; n: number; verified: boolean }> = [];
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const verified = verifyWebhook(
      SECRET,
      String(req.headers[TIMESTAMP_HEADER]),
      body,
      String(req.headers[SIGNATURE_HEADER]),
    );
    const parsed = JSON.parse(body);
    if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
    const status = answer(parsed);
    if (status === 200) received.push({ id: parsed.id, key: parsed.key, n: parsed.event.n, verified });
    res.writeHead(status).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { url, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * The per-key order a consumer sees under at-least-once delivery: every value
 * is the next one (previous + 1) or a replay that restarts at most `maxReplay`
 * behind the highest value seen; no value ever skips ahead; the stream ends at
 * `last`. Dropping values at or below the highest seen leaves exactly 1..last.
 */
export function assertInOrderAtLeastOnce(seen: number[], last: number, maxReplay = 1): void {
  let previous = 0;
  let highest = 0;
  for (const n of seen) {
    expect(n).toBeLessThanOrEqual(highest + 1);
    if (n !== previous + 1) expect(n).toBeGreaterThan(highest - maxReplay);
    previous = n;
    highest = Math.max(highest, n);
  }
  expect(highest).toBe(last);
  expect(seen.at(-1)).toBe(last);
}

/** True when something accepts TCP connections at host:port within 1 s. */
export async function reachable(host: string, port: number): Promise<boolean> {
  const net = await import("node:net");
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * When a service or toolchain a suite needs is absent: fail under CI, where .ci/run provisions it and
 * the suite must really run; elsewhere mark the test skipped with the reason, so the summary counts it
 * as skipped, never as passed (call it with the test's context: `(ctx) => absentService(ctx, …)`).
 */
export function absentService(ctx: TestContext, what: string, why: string): void {
  expect(process.env.CI, `${what} must be reachable in CI (${why})`).toBeFalsy();
  console.warn(`[skipq tests] ${what} tests not run: ${why}`);
  ctx.skip(`${what} is absent: ${why}`);
}
