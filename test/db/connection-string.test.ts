/**
 * libpq-style connection strings as skipq parses them (src/db/connectionString.ts):
 * host lists with per-host ports and defaults, target_session_attrs,
 * connect_timeout; the URL node-postgres is handed keeps every other parameter;
 * malformed input is a ValidationError that names the fault, before any
 * connection is tried. No database needed.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { describeHosts, parseConnectionString } from "../../src/db/connectionString.js";
import { ValidationError } from "../../src/index.js";

const parse = parseConnectionString;

describe("host lists", () => {
  it("every host of the list is kept in order, each with its own port, a missing port being 5432", () => {
    const t = parse("postgres://u:pw@h1:5433,h2,[::1]:6000,[fe80::2]/db?target_session_attrs=read-write");
    expect(t.hosts).toEqual([
      { host: "h1", port: 5433 },
      { host: "h2", port: 5432 },
      { host: "::1", port: 6000 },
      { host: "fe80::2", port: 5432 },
    ]);
    expect(t.targetSessionAttrs).toBe("read-write");
    expect(t.managed).toBe(true);
  });

  it("?port= is the default port of the hosts whose entry names none", () => {
    expect(parse("postgres://h1,h2:5433/db?port=6432").hosts).toEqual([
      { host: "h1", port: 6432 },
      { host: "h2", port: 5433 },
    ]);
  });

  it("?host=h1,h2&port=… lists hosts too: one port for all, or one per host", () => {
    expect(parse("postgres://u@/db?host=h1,h2&port=5433").hosts).toEqual([
      { host: "h1", port: 5433 },
      { host: "h2", port: 5433 },
    ]);
    expect(parse("postgresql:///db?host=h1,%2Ftmp&port=5433,5434").hosts).toEqual([
      { host: "h1", port: 5433 },
      { host: "/tmp", port: 5434 },
    ]);
  });

  it("a single-host URL without target_session_attrs is handed to node-postgres unchanged", () => {
    for (const url of [
      "postgres://u:p%40ss@db.example:5432/app?sslmode=require&application_name=x",
      "postgresql://localhost/app",
      "postgres:///app?host=/var/run/postgresql",
      "socket:/var/run/postgresql?db=app",
    ]) {
      const t = parse(url);
      expect(t.managed).toBe(false);
      expect(t.clientUrl).toBe(url);
    }
  });
});

describe("the URL node-postgres reads", () => {
  it("has the first host, and every parameter but target_session_attrs, host and port, as node-postgres parses them", () => {
    const t = parse(
      "postgres://app:s%3Acret@h1:5433,h2:5434/orders?sslmode=disable&application_name=billing&options=-c%20search_path%3Dx&target_session_attrs=primary&connect_timeout=3",
    );
    expect(t.clientUrl).toBe(
      "postgres://app:s%3Acret@h1:5433/orders?sslmode=disable&application_name=billing&options=-c%20search_path%3Dx&connect_timeout=3",
    );
    const config = new pg.Client({ connectionString: t.clientUrl }) as unknown as {
      user: string;
      password: string;
      database: string;
      host: string;
      port: number;
      connectionParameters: { application_name: string; options: string };
    };
    expect([config.user, config.password, config.database, config.host, config.port]).toEqual([
      "app",
      "s:cret",
      "orders",
      "h1",
      5433,
    ]);
    expect(config.connectionParameters.application_name).toBe("billing");
    expect(config.connectionParameters.options).toBe("-c search_path=x");
    expect(t.connectTimeoutMs).toBe(3000);
  });

  it("an IPv6 first host keeps its brackets; a socket directory goes in ?host=", () => {
    expect(parse("postgres://[::1]:5433,h2/db").clientUrl).toBe("postgres://[::1]:5433/db");
    expect(parse("postgres://u@/db?host=/tmp,h2&port=5433").clientUrl).toBe("postgres://u@/db?host=%2Ftmp&port=5433");
  });

  it("describes the hosts without the user or password", () => {
    const t = parse("postgres://app:secret@h1:5433,[::1]/db?target_session_attrs=read-write");
    expect(describeHosts(t)).toBe("h1:5433, [::1]:5432 (target_session_attrs=read-write)");
    expect(describeHosts(t)).not.toContain("secret");
  });
});

describe("target_session_attrs and connect_timeout", () => {
  it("accepts libpq's values; any is the default", () => {
    for (const v of ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"]) {
      expect(parse(`postgres://h1,h2/db?target_session_attrs=${v}`).targetSessionAttrs).toBe(v);
    }
    expect(parse("postgres://h1,h2/db").targetSessionAttrs).toBe("any");
  });

  it("a single host with target_session_attrs is managed (its server is checked)", () => {
    const t = parse("postgres://h1/db?target_session_attrs=read-write");
    expect(t.managed).toBe(true);
    expect(t.clientUrl).toBe("postgres://h1:5432/db");
  });

  it("connect_timeout is per host in ms, at least 2 s, 0 meaning none (libpq's rules)", () => {
    expect(parse("postgres://h1,h2/db?connect_timeout=1").connectTimeoutMs).toBe(2000);
    expect(parse("postgres://h1,h2/db?connect_timeout=0").connectTimeoutMs).toBeUndefined();
    expect(parse("postgres://h1,h2/db").connectTimeoutMs).toBeUndefined();
  });
});

describe("bad input is a ValidationError that says what to do", () => {
  const cases: Array<[string, string, RegExp]> = [
    ["an empty host in the list", "postgres://u@h1:5432,,h2/db", /host 2 of 3 in the connection string is empty/],
    ["a trailing comma", "postgres://u@h1:5432,/db", /host 2 of 2 in the connection string is empty/],
    ["a port without a host", "postgres://u@:5432,h2/db", /host 1 of 2 .* is empty/],
    ["an empty host in ?host=", "postgres:///db?host=h1,,h3", /host 2 of 3 in \?host= is empty/],
    ["a port of 0", "postgres://h1:0,h2/db", /port of host 1 of 2 \(h1\) is "0", not a port number: use 1-65535/],
    ["a port over 65535", "postgres://h1,h2:65536/db", /port of host 2 of 2 \(h2\) is "65536"/],
    ["a port that is not a number", "postgres://h1:54x2/db", /port of the host \(h1\) is "54x2"/],
    ["a bad default port", "postgres://h1,h2/db?port=abc", /every host \(\?port=\) is "abc"/],
    ["ports that do not match the hosts", "postgres:///db?host=a,b,c&port=1,2", /3 hosts but 2 ports/],
    ["hosts named twice", "postgres://h1,h2/db?host=h3", /names its hosts twice/],
    ["an unclosed IPv6 bracket", "postgres://[::1:5432,h2/db", /never closes it/],
    ["text after an IPv6 address", "postgres://[::1]x,h2/db", /has "x" after its address/],
    [
      "an unknown target_session_attrs",
      "postgres://h1,h2/db?target_session_attrs=read_write",
      /target_session_attrs="read_write" is not one of any, read-write, read-only, primary, standby, prefer-standby \(did you mean "read-write"\?\)/,
    ],
    [
      "a connect_timeout that is not seconds",
      "postgres://h1/db?connect_timeout=2s",
      /connect_timeout="2s" is not a whole number/,
    ],
  ];
  for (const [what, url, message] of cases) {
    it(`${what}: ${url}`, () => {
      let error: unknown;
      try {
        parse(url);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toMatch(message);
    });
  }
});
