import type http from "node:http";
import { expect, test } from "vitest";
import type { StatsPoint } from "../../src/ops/adminTypes.js";
import { clientAddress, isLoopback, parseCookies, resolveCredentials } from "../../src/ops/dashboard/auth.js";
import { statsCharts, throughputChart } from "../../src/ops/dashboard/chart.js";
import { escapeHtml, html, raw } from "../../src/ops/dashboard/html.js";
import { signInPage } from "../../src/ops/dashboard/layout.js";
import { REDACTED, redactKeys } from "../../src/ops/dashboard/redact.js";

test("escapeHtml turns every markup-significant character into an entity", () => {
  expect(escapeHtml(`<script>alert("x")</script>&'\``)).toBe(
    "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;",
  );
  expect(escapeHtml(null)).toBe("");
  expect(escapeHtml(42)).toBe("42");
});

test("html escapes every interpolation, including inside attributes and arrays", () => {
  const hostile = `"><img src=x onerror=alert(1)>`;
  const out = html`<a title="${hostile}">${[hostile, hostile]}</a>`.toString();
  expect(out).not.toContain("<img");
  expect(out).toBe(
    '<a title="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;">&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;</a>',
  );
});

test("html keeps nested html and raw markup as is, and renders false/null/undefined as nothing", () => {
  const inner = html`<b>${"<i>"}</b>`;
  expect(html`<p>${inner}${raw("<br>")}${false}${null}${undefined}</p>`.toString()).toBe("<p><b>&lt;i&gt;</b><br></p>");
});

test("the throughput chart escapes its label and draws one bar per minute", () => {
  const svg = throughputChart([0, 3, 1], `<x>`).toString();
  expect(svg).not.toContain("<x>");
  expect(svg.match(/<rect /g)).toHaveLength(3);
  expect(svg).toContain("4 in the last hour");
});

test("a chart has a y axis (0 and its maximum), a zero line, start and end times, and no bar or line across a bucket with no data", () => {
  const t0 = Date.UTC(2026, 0, 31, 9, 0);
  // Six minutes: data, data (a zero), no data, no data, data, data.
  const points: StatsPoint[] = [7, 0, null, null, 3, 5].map((v, i) => ({
    t: new Date(t0 + i * 60_000),
    completed: v ?? 0,
    failed: 0,
    cancelled: 0,
    depth: v,
    running: v === null ? null : 1,
    p50: null,
    p95: null,
    rolledUp: v !== null,
  }));
  const svg = statsCharts(points, "1 h ago").toString();
  const chart = (id: string) => new RegExp(`<svg id="${id}"[\\s\\S]*?</svg>`).exec(svg)?.[0] ?? "";
  const throughput = chart("chart-throughput");
  expect(throughput).toContain('aria-label="Throughput: 15 completed; no data for 2 of 6 buckets"');
  expect(throughput).toMatch(/<text class="y-max"[^>]*>7<\/text>/);
  expect(throughput).toMatch(/<text class="y-zero"[^>]*>0<\/text>/);
  expect(throughput).toContain('class="axis zero-line"');
  expect(throughput).toMatch(/<text class="x-start"[^>]*data-datetime="2026-01-31T09:00:00.000Z">09:00Z<\/text>/);
  expect(throughput).toMatch(/<text class="x-end"[^>]*data-datetime="2026-01-31T09:05:00.000Z">09:05Z<\/text>/);
  expect(throughput).toContain("1 h ago → now");
  // Bars for minutes 0, 4 and 5; minute 1 is a zero (a flat mark); minutes 2-3 are one gap and no bar.
  const bars = [...throughput.matchAll(/<rect class="b3( zero)?"[^>]*><title>([^<]*)<\/title>/g)].map((m) => [
    m[2],
    !!m[1],
  ]);
  expect(bars).toEqual([
    ["2026-01-31 09:00Z: 7 completed", false],
    ["2026-01-31 09:01Z: 0 completed", true],
    ["2026-01-31 09:04Z: 3 completed", false],
    ["2026-01-31 09:05Z: 5 completed", false],
  ]);
  expect(throughput.match(/<rect class="gap"[^>]*><title>([^<]*)</g)).toEqual([
    '<rect class="gap" x="180.7" y="20" width="146.7" height="112"><title>No data 2026-01-31 09:02Z – 2026-01-31 09:03Z<',
  ]);
  // A line stops at a gap: two polylines per series, none through minutes 2-3.
  const depth = chart("chart-depth");
  expect(depth.match(/<polyline class="s1"/g)).toHaveLength(2);
  expect(depth.match(/<circle class="b1"/g)).toHaveLength(4);
  // A day's range names the dates; no style attribute anywhere (the CSP allows none).
  const day = statsCharts(
    points.map((p, i) => ({ ...p, t: new Date(t0 + i * 4 * 3_600_000) })),
    "24 h ago",
  ).toString();
  expect(day).toMatch(/data-datetime="2026-01-31T09:00:00.000Z">01-31 09:00Z</);
  expect(day).toMatch(/data-datetime="2026-02-01T05:00:00.000Z">02-01 05:00Z</);
  expect(svg + day).not.toMatch(/\sstyle=|<script/);
});

test("redactKeys hides secret-looking keys at any depth and leaves the input untouched", () => {
  const payload = { user: "ada", password: "p", nested: [{ apiKey: "k", note: "fine" }], Authorization: "Bearer x" };
  const shown = redactKeys()(payload, { field: "payload", job: { id: "1", queue: "q", kind: "k" } });
  expect(shown).toEqual({
    user: "ada",
    password: REDACTED,
    nested: [{ apiKey: REDACTED, note: "fine" }],
    Authorization: REDACTED,
  });
  expect(payload.password).toBe("p");
});

test("redactKeys walks any depth without recursion: a secret 100,000 levels down is hidden", () => {
  let payload: unknown = { apiKey: "k", keep: "v" };
  for (let i = 0; i < 100_000; i++) payload = i % 2 ? { x: payload } : [payload];
  let shown = redactKeys()(payload, { field: "payload", job: { id: "1", queue: "q", kind: "k" } });
  for (let i = 0; i < 100_000; i++) shown = Array.isArray(shown) ? shown[0] : (shown as { x: unknown }).x;
  expect(shown).toEqual({ apiKey: REDACTED, keep: "v" });
});

test("credentials come from options first, then the environment, and weak ones are refused", () => {
  expect(resolveCredentials(undefined, {})).toBeUndefined();
  expect(resolveCredentials(undefined, { SKIPQ_DASHBOARD_TOKEN: "t".repeat(20) })?.token).toBe("t".repeat(20));
  expect(resolveCredentials({ token: "o".repeat(16) }, { SKIPQ_DASHBOARD_TOKEN: "t".repeat(20) })?.token).toBe(
    "o".repeat(16),
  );
  expect(() => resolveCredentials({ token: "short" }, {})).toThrow(/at least 16/);
  expect(() => resolveCredentials(undefined, { SKIPQ_DASHBOARD_USER: "ops" })).toThrow(/both a user and a password/);
  expect(
    resolveCredentials(undefined, { SKIPQ_DASHBOARD_USER: "ops", SKIPQ_DASHBOARD_PASSWORD: "long enough" }),
  ).toEqual({
    token: undefined,
    user: "ops",
    password: "long enough",
  });
});

test("loopback detection accepts only loopback addresses", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"])
    expect(isLoopback(h)).toBe(true);
  for (const h of ["0.0.0.0", "::", "10.0.0.1", "example.com", "", undefined]) expect(isLoopback(h)).toBe(false);
});

test("parseCookies keeps the first value of a repeated cookie", () => {
  expect(parseCookies("a=1; b=x%20y; a=2")).toEqual({ a: "1", b: "x y" });
});

test("throttling counts a client by its address, IPv6 per /64, and trusts X-Forwarded-For only behind a trusted proxy", () => {
  const req = (remoteAddress: string, forwarded?: string) =>
    ({ socket: { remoteAddress }, headers: forwarded ? { "x-forwarded-for": forwarded } : {} }) as http.IncomingMessage;
  expect(clientAddress(req("::ffff:10.0.0.7"), false)).toBe("10.0.0.7");
  expect(clientAddress(req("2001:db8:1:2:aaaa::1"), false)).toBe("2001:db8:1:2::/64");
  expect(clientAddress(req("2001:db8:1:2:bbbb:cccc:dddd:eeee"), false)).toBe("2001:db8:1:2::/64");
  expect(clientAddress(req("::1"), false)).toBe("0:0:0:0::/64");
  expect(clientAddress(req("10.0.0.1", "203.0.113.9"), false)).toBe("10.0.0.1");
  // Behind a proxy, the last hop is the address the proxy saw; earlier ones are the client's to forge.
  expect(clientAddress(req("10.0.0.1", "1.1.1.1, 203.0.113.9"), true)).toBe("203.0.113.9");
  expect(clientAddress(req("10.0.0.1"), true)).toBe("10.0.0.1");
});

test("the sign-in page's content is one <main> landmark: heading, message and form inside it", () => {
  const page = signInPage(
    { base: "/ops", title: "skipq", csrf: undefined, flash: undefined },
    { token: true, password: true, next: "/", message: "Wrong credentials" },
  ).toString();
  expect(page.match(/<main\b/g)).toHaveLength(1);
  const main = /<main class="signin" id="main">([\s\S]*)<\/main>/.exec(page)?.[1] ?? "";
  expect(main).toContain("<h1>skipq</h1>");
  expect(main).toContain('role="alert">Wrong credentials');
  expect(main).toMatch(/<form method="post" action="\/ops\/login">[\s\S]*<\/form>/);
  expect(page.replace(/<main[\s\S]*<\/main>/, "")).not.toMatch(/<(form|h1|input)\b/);
});

test("the sign-in page says where the credentials are configured, naming only settings that really exist, never a value", () => {
  const page = (token: boolean, password: boolean) =>
    signInPage(
      { base: "", title: "skipq", csrf: undefined, flash: undefined },
      { token, password, next: "/" },
    ).toString();
  const hint = (text: string) => /<div class="hint" id="signin-hint">([\s\S]*?)<\/div>/.exec(text)?.[1] ?? "";
  const tokenOnly = hint(page(true, false));
  expect(tokenOnly).toContain("<code>SKIPQ_DASHBOARD_TOKEN</code> in the server's environment");
  expect(tokenOnly).toContain("<code>auth: { token }</code>");
  expect(tokenOnly).toContain(
    "<code>skipq dashboard</code> (and <code>startDashboard</code>) on 127.0.0.1 generates a one-time token and prints it in its log",
  );
  expect(tokenOnly).not.toContain("SKIPQ_DASHBOARD_PASSWORD");
  const passwordOnly = hint(page(false, true));
  expect(passwordOnly).toContain("<code>SKIPQ_DASHBOARD_USER</code> and <code>SKIPQ_DASHBOARD_PASSWORD</code>");
  expect(passwordOnly).not.toContain("SKIPQ_DASHBOARD_TOKEN");
  // Every variable the hint names is one the dashboard reads its credentials from.
  const named = [...hint(page(true, true)).matchAll(/<code>(SKIPQ_\w+)<\/code>/g)].map((m) => m[1] as string);
  expect(named.sort()).toEqual([
    "SKIPQ_DASHBOARD_PASSWORD",
    "SKIPQ_DASHBOARD_TOKEN",
    "SKIPQ_DASHBOARD_USER",
    "SKIPQ_DASHBOARD_VIEWER_PASSWORD",
    "SKIPQ_DASHBOARD_VIEWER_TOKEN",
    "SKIPQ_DASHBOARD_VIEWER_USER",
  ]);
  const env = {
    SKIPQ_DASHBOARD_TOKEN: "a".repeat(20),
    SKIPQ_DASHBOARD_USER: "ops",
    SKIPQ_DASHBOARD_PASSWORD: "b".repeat(12),
    SKIPQ_DASHBOARD_VIEWER_TOKEN: "c".repeat(20),
    SKIPQ_DASHBOARD_VIEWER_USER: "eyes",
    SKIPQ_DASHBOARD_VIEWER_PASSWORD: "d".repeat(12),
  };
  expect(resolveCredentials(undefined, env)).toEqual({
    token: env.SKIPQ_DASHBOARD_TOKEN,
    user: "ops",
    password: env.SKIPQ_DASHBOARD_PASSWORD,
    viewer: { token: env.SKIPQ_DASHBOARD_VIEWER_TOKEN, user: "eyes", password: env.SKIPQ_DASHBOARD_VIEWER_PASSWORD },
  });
});
