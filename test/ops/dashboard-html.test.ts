import type http from "node:http";
import { expect, test } from "vitest";
import { clientAddress, isLoopback, parseCookies, resolveCredentials } from "../../src/ops/dashboard/auth.js";
import { throughputChart } from "../../src/ops/dashboard/chart.js";
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
