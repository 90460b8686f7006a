/**
 * The dashboard as a fetch handler, `(Request) => Promise<Response>`, for
 * servers built on web-standard requests (Hono, Next.js route handlers, Bun,
 * Deno). It drives the same Node handler through a minimal request and
 * response pair: the body is read from the Request, the answer streams into
 * the Response (so the live feed's events flow as they are written), and the
 * stream ends when the client goes away (the Request's signal).
 *
 * The caller says where the request came from (`remoteAddress`), as a Node
 * server's socket would: it keys the sign-in throttle and decides whether a
 * dashboard without authentication may answer (loopback peers only). It is
 * never taken from the request (its URL's host is the client's Host header,
 * and any header is the client's to write): without it, every request is
 * answered 500 with what to pass.
 */
import type http from "node:http";
import { Readable } from "node:stream";

/** A Node request handler, mountable into `http`, Express/Connect or Fastify (through `reply.raw`). */
export type DashboardHandler = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  next?: (err?: unknown) => void,
) => void;

export interface FetchContext {
  /**
   * The peer address of the connection the request came over (a Node server's `socket.remoteAddress`), or
   * one that only your own reverse proxy writes. Required: it keys the sign-in throttle per client, and with
   * `auth: false` only a loopback peer is answered. Never pass a header a client can send itself.
   */
  remoteAddress: string;
  /** The address the request arrived on (`socket.localAddress`). Default "unknown". */
  localAddress?: string;
  /** The port the request arrived on (`socket.localPort`). With `auth: false` the Host header must name it; without it such a dashboard refuses. */
  localPort?: number;
}

export type FetchHandler = (request: Request, context: FetchContext) => Promise<Response>;

const MAX_BODY = 64 * 1024;

/** Wraps a Node request handler (the dashboard's `handle`) as a fetch handler. */
export function toFetchHandler(handle: DashboardHandler): FetchHandler {
  return async (request, context) => {
    const remoteAddress = (context as FetchContext | undefined)?.remoteAddress;
    if (typeof remoteAddress !== "string" || remoteAddress.trim() === "")
      return new Response(
        "dashboard.fetch was called without the client's address: pass { remoteAddress } (the connection's peer address, e.g. socket.remoteAddress; never a header the client sends), see docs/dashboard.md#mount-it-in-your-own-server\n",
        { status: 500, headers: { "content-type": "text/plain; charset=utf-8" } },
      );
    const url = new URL(request.url);
    const body = request.body ? Buffer.from(await readCapped(request)) : undefined;
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    headers.host ??= url.host;
    const req = new Readable({ autoDestroy: false, read() {} }) as Readable & Record<string, unknown>;
    if (body && body.length > 0) req.push(body);
    req.push(null);
    Object.assign(req, {
      method: request.method,
      url: `${url.pathname}${url.search}`,
      headers,
      socket: {
        remoteAddress: remoteAddress.trim(),
        localAddress: context.localAddress ?? "unknown",
        localPort: context.localPort,
        encrypted: url.protocol === "https:",
      },
    });
    return new Promise<Response>((resolve) => {
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      let closed = false;
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          controller = c;
        },
        cancel() {
          closed = true;
          req.emit("close");
        },
      });
      request.signal?.addEventListener("abort", () => {
        if (closed) return;
        closed = true;
        req.emit("close");
        try {
          controller.close();
        } catch {
          // already closed
        }
      });
      const pending: Record<string, string | string[] | number> = {};
      let sent = false;
      const res = {
        statusCode: 200,
        headersSent: false,
        setHeader(name: string, value: string | string[] | number) {
          pending[name.toLowerCase()] = value;
          return res;
        },
        getHeader(name: string) {
          return pending[name.toLowerCase()];
        },
        writeHead(status: number, more: Record<string, string | string[] | number | undefined> = {}) {
          res.statusCode = status;
          for (const [k, v] of Object.entries(more)) if (v !== undefined) pending[k.toLowerCase()] = v;
          res.flushHeaders();
          return res;
        },
        flushHeaders() {
          if (sent) return;
          sent = true;
          res.headersSent = true;
          const out = new Headers();
          for (const [k, v] of Object.entries(pending))
            for (const one of Array.isArray(v) ? v : [String(v)]) out.append(k, one);
          const nobody = request.method === "HEAD" || res.statusCode === 204 || res.statusCode === 304;
          resolve(new Response(nobody ? null : stream, { status: res.statusCode, headers: out }));
        },
        write(chunk: string | Uint8Array) {
          res.flushHeaders();
          if (!closed) controller.enqueue(typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk);
          return true;
        },
        end(chunk?: string | Uint8Array) {
          if (chunk !== undefined) res.write(chunk);
          else res.flushHeaders();
          if (!closed) {
            closed = true;
            controller.close();
          }
          return res;
        },
        destroy() {
          if (!sent) {
            sent = true;
            resolve(new Response("bad request\n", { status: 400 }));
          }
          if (!closed) {
            closed = true;
            controller.close();
          }
        },
        on() {
          return res;
        },
        once() {
          return res;
        },
      };
      handle(req as never, res as never);
    });
  };
}

/** The request body, refused past MAX_BODY (the handler answers 413 for forms before that anyway). */
async function readCapped(request: Request): Promise<Uint8Array> {
  const reader = (request.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_BODY) {
      await reader.cancel();
      break;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
