/**
 * The metrics' own HTTP endpoint, for workers without a dashboard:
 * `GET /metrics` on a port of its own (127.0.0.1 unless told otherwise), the
 * Prometheus text of one `SkipqMetrics`. With a token, a scrape must send it
 * as a Bearer header, compared in constant time; anything else is a 404.
 * It serves nothing but the exposition and never writes to the database.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { SkipqMetrics } from "./metrics.js";

export interface ServeMetricsOptions {
  metrics: SkipqMetrics;
  /** Port to listen on; 0 picks a free one. */
  port: number;
  /** Address to listen on. Default "127.0.0.1"; use "0.0.0.0" for a scraper on another host. */
  host?: string;
  /** When set, scrapes must send `Authorization: Bearer <token>`. Default: none. */
  token?: string;
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/** Serves `GET /metrics` on its own port (for workers without a dashboard). */
export async function serveMetrics(options: ServeMetricsOptions): Promise<MetricsServer> {
  const { metrics } = options;
  const digest = (text: string) => createHash("sha256").update(text).digest();
  const expected = options.token === undefined ? undefined : digest(`Bearer ${options.token}`);
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found; metrics are at /metrics\n");
      return;
    }
    if (expected !== undefined && !timingSafeEqual(digest(req.headers.authorization ?? ""), expected)) {
      res.writeHead(401, { "content-type": "text/plain" }).end("send Authorization: Bearer <token>\n");
      return;
    }
    metrics.metrics().then(
      (text) => res.writeHead(200, { "content-type": metrics.contentType }).end(text),
      (error) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics failed: ${String(error)}\n`),
    );
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
