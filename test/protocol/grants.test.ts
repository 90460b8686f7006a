/**
 * What a database role can do with the SQL protocol (docs/security.md): the
 * functions run with the caller's rights (SECURITY INVOKER), so EXECUTE alone
 * does nothing; the grants that make them work also allow a direct UPDATE, so
 * the functions are a protocol, not a security boundary. Any role that can
 * connect can NOTIFY the workers' channel: a notification is only a hint.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { DATABASE_URL, useTestQueue } from "../helpers.js";

const t = useTestQueue("protocol_grants");
const role = `skipq_grants_${randomBytes(4).toString("hex")}`;
const password = randomBytes(12).toString("hex");

beforeAll(async () => {
  await t.db.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  await t.db.query(`GRANT USAGE ON SCHEMA "${t.schema}" TO ${role}`);
});
afterAll(async () => {
  await t.db.query(`DROP OWNED BY ${role}`);
  await t.db.query(`DROP ROLE ${role}`);
});

/** Runs one statement as the test role; resolves to its rows or to the SQLSTATE it failed with. */
async function asRole(sql: string): Promise<{ rows: Array<Record<string, unknown>> } | { code: string }> {
  const url = new URL(DATABASE_URL);
  url.username = role;
  url.password = password;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return { rows: (await client.query(sql)).rows };
  } catch (error) {
    return { code: (error as { code: string }).code };
  } finally {
    await client.end();
  }
}

test("a role with only USAGE and the protocol functions can claim nothing and read nothing", async () => {
  await t.skipq.enqueue("grants", { secret: 1 }, { queue: "grants" });
  const s = `"${t.schema}"`;
  expect(await asRole(`SELECT * FROM ${s}.skipq_claim(ARRAY['grants'], 1, 'w', 30000)`)).toEqual({ code: "42501" });
  expect(await asRole(`SELECT ${s}.skipq_complete(1, 1)`)).toEqual({ code: "42501" });
  expect(await asRole(`SELECT payload FROM ${s}.jobs`)).toEqual({ code: "42501" });
  const { rows } = await t.db.query(`SELECT status FROM ${s}.jobs WHERE queue = 'grants'`);
  expect(rows).toEqual([{ status: "pending" }]);
});

test("the grants a protocol worker needs also let it update any job directly, and still not insert one", async () => {
  const s = `"${t.schema}"`;
  await t.db.query(`GRANT SELECT, UPDATE ON ${s}.jobs TO ${role}`);
  await t.db.query(`GRANT SELECT ON ${s}.queues TO ${role}`);
  const claimed = await asRole(`SELECT id FROM ${s}.skipq_claim(ARRAY['grants'], 1, 'w', 30000)`);
  expect("rows" in claimed && claimed.rows).toHaveLength(1);
  expect(await asRole(`UPDATE ${s}.jobs SET priority = 5 WHERE queue = 'grants' RETURNING id`)).toHaveProperty("rows");
  expect(await asRole(`INSERT INTO ${s}.jobs (kind) VALUES ('forged')`)).toEqual({ code: "42501" });
  expect(await asRole(`SELECT * FROM ${s}.outbox`)).toEqual({ code: "42501" });
  expect(await asRole(`SELECT * FROM ${s}.dashboard_sessions`)).toEqual({ code: "42501" });
});

test("any role that can connect can send a notification on the workers' channel, without any grant", async () => {
  expect(await asRole(`NOTIFY "skipq:${t.schema}", '!cancel:1'`)).toEqual({ rows: [] });
  expect(await asRole(`SELECT pg_notify('skipq:${t.schema}', 'grants')`)).toHaveProperty("rows");
});
