/**
 * What every dashboard request passes before a route answers it, and how a
 * failed one is answered. Without authentication only this machine is
 * answered (a loopback peer, a loopback Host on this port or an allowed
 * host); a POST's Origin, when sent, must be this host. A failure is an HTML
 * page only for a signed-in GET, and a 500 never shows its cause.
 */
import type http from "node:http";
import { SkipqError, ValidationError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { hostAnswered, hostParts, isLoopback, type Principal, ThrottledError } from "./auth.js";
import type { PageContext } from "./layout.js";
import type { DashboardOptions } from "./options.js";
import { forwarded, HttpError, safeHost } from "./request.js";
import type { DashboardRuntime } from "./routes.js";
import { messagePage } from "./views.js";

export /** `allowedHosts`, validated: Host names (optionally with a port); only meaningful without authentication. */
function checkedAllowedHosts(options: DashboardOptions): string[] {
  const hosts = options.allowedHosts;
  if (hosts === undefined) return [];
  if (!Array.isArray(hosts) || hosts.some((h) => typeof h !== "string" || hostParts(h) === undefined))
    throw new ValidationError(
      'allowedHosts must be an array of host names as a Host header carries them, e.g. ["dev.internal", "dev.internal:8080"]',
    );
  if (options.auth !== false)
    throw new ValidationError(
      "allowedHosts applies to a dashboard with auth: false only (with credentials every Host is answered); remove it",
    );
  return hosts;
}

/**
 * Refuses what no route may answer. Without authentication, only this machine: the connection's peer must be
 * loopback (never a header: a fetch mount passes the peer explicitly), and the Host must name loopback on this
 * server's port (or an allowed host), or a DNS-rebinding page could read the CSRF token and act. A POST's
 * Origin, when sent, must be this host.
 */
export function refuseUnsafe(
  req: http.IncomingMessage,
  authEnabled: boolean,
  allowedHosts: string[],
  trustProxy: boolean,
) {
  if (!authEnabled) {
    if (!isLoopback(req.socket.remoteAddress))
      throw new HttpError(
        403,
        "this dashboard runs without authentication, so it answers clients on loopback only; configure credentials to expose it",
      );
    const tls = (req.socket as { encrypted?: boolean }).encrypted === true;
    if (!hostAnswered(req.headers.host, req.socket.localPort, tls, allowedHosts))
      throw new HttpError(
        403,
        "this dashboard runs without authentication, so it answers only requests whose Host is a loopback name or address with its port (a page on another name could be a DNS-rebinding attack); open it at http://127.0.0.1:<port>/, or list the name in allowedHosts",
      );
  }
  if (req.method === "POST") {
    const origin = req.headers.origin;
    const host = safeHost(origin ?? "");
    const hosts = [req.headers.host, trustProxy ? forwarded(req, "x-forwarded-host") : undefined];
    if (origin !== undefined && origin !== "null" && (host === undefined || !hosts.includes(host)))
      throw new HttpError(403, "cross-origin POSTs are refused");
    if (origin === "null") throw new HttpError(403, "cross-origin POSTs are refused");
  }
}

/** The status a failed request is answered with. */
export function statusOf(error: unknown): number {
  if (error instanceof HttpError) return error.status;
  if (!(error instanceof SkipqError)) return 500;
  return error.code === "SKIPQ_NOT_FOUND" ? 404 : error.code === "SKIPQ_INVALID_ARGUMENT" ? 400 : 500;
}

/** Answers a request whose handling failed (unless the client is gone or the answer was under way). */
export function answerFailure(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  error: unknown,
  o: {
    path: string;
    signedIn: Principal | undefined;
    ctx: PageContext;
    logger: Logger;
    send: DashboardRuntime["send"];
  },
): void {
  const { path, logger, send } = o;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // The client hung up mid-request (Node rejects the body read with ECONNRESET "aborted"): nobody is
  // left to answer, and it is not the server's fault.
  if (req.socket.destroyed || (error as NodeJS.ErrnoException).code === "ECONNRESET") {
    logger.debug({ path }, "skipq dashboard: client closed the connection mid-request");
    res.destroy();
    return;
  }
  if (error instanceof ThrottledError) {
    send(res, 429, `${error.message}\n`, { "retry-after": String(error.retryAfterSeconds) });
    return;
  }
  const status = statusOf(error);
  if (status === 500) logger.error({ err: error, path }, "skipq dashboard: request failed");
  const text = status === 500 ? "Something went wrong; the server log has the details." : (error as Error).message;
  if (req.method === "GET" && o.signedIn) send(res, status, messagePage(o.ctx, `Error ${status}`, text));
  else send(res, status, `${text}\n`);
}
