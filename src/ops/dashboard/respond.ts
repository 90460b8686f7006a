/**
 * The dashboard's response helpers: every answer with its security headers
 * (strict CSP, no caching, no framing), cookies scoped to the base path
 * (Secure when the request came over TLS), redirects, and the check that keeps
 * a redirect target on this origin under the base path. They write responses
 * and never read the database.
 */
import type http from "node:http";
import type { SafeHtml } from "./html.js";
import { forwarded } from "./request.js";

/** The origin redirect targets are resolved against; never contacted, only compared. */
export const FIXED_ORIGIN = "http://dashboard.invalid";

export interface RespondOptions {
  base: string;
  /** The Content-Security-Policy header of every answer. */
  csp: string;
  secureCookies: boolean;
  trustProxy: boolean;
}

/** The response helpers of one dashboard. */
export function responders({ base, csp, secureCookies, trustProxy }: RespondOptions) {
  const send = (
    res: http.ServerResponse,
    status: number,
    body: SafeHtml | string,
    headers: http.OutgoingHttpHeaders = {},
  ) => {
    const isHtml = typeof body !== "string";
    res.writeHead(status, {
      "content-type": isHtml ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      // same-origin, not no-referrer: with no-referrer, browsers send "Origin: null" on form POSTs, which the origin check refuses.
      "referrer-policy": "same-origin",
      "x-frame-options": "DENY",
      "content-security-policy": csp,
      ...headers,
    });
    res.end(String(body));
  };

  const cookie = (req: http.IncomingMessage, name: string, value: string, maxAgeSeconds: number) => {
    const tls =
      secureCookies ||
      (req.socket as { encrypted?: boolean }).encrypted === true ||
      (trustProxy && forwarded(req, "x-forwarded-proto")?.toLowerCase() === "https");
    const secure = tls ? "; Secure" : "";
    return `${name}=${encodeURIComponent(value)}; Path=${base || "/"}; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`;
  };

  const redirect = (res: http.ServerResponse, location: string, cookies: string[] = []) =>
    send(res, 303, "see other\n", { location, ...(cookies.length ? { "set-cookie": cookies } : {}) });

  /**
   * A redirect target from a form or a link: only a path under the base path
   * on this origin. The value is resolved the way a browser would (dropping
   * TAB/CR/LF, reading "\\" as "/", resolving dot segments) against a fixed
   * origin, and only the resolved, re-serialised path and query are used, so
   * "/\t/evil.example" or "/.//evil.example" cannot become "//evil.example".
   */
  const safeBack = (value: string | null | undefined): string => {
    const home = `${base}/`;
    if (typeof value !== "string" || !value.startsWith("/") || value.length > 2048) return home;
    let target: URL;
    try {
      target = new URL(value, `${FIXED_ORIGIN}${home}`);
    } catch {
      return home;
    }
    const path = target.pathname;
    if (target.origin !== FIXED_ORIGIN || path.startsWith("//")) return home;
    if (path !== base && !path.startsWith(home)) return home;
    return `${path}${target.search}`;
  };

  return { send, cookie, redirect, safeBack };
}
