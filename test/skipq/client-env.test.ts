/**
 * The client's configuration from the environment, as the CLI reads it: DATABASE_URL when no
 * connectionString is given, SKIPQ_SCHEMA when no schema is; an explicit option always wins.
 */
import { afterEach, expect, test } from "vitest";
import { Skipq, silentLogger, ValidationError } from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";

const t = useTestQueue("client_env");
const saved = process.env.SKIPQ_SCHEMA;
afterEach(() => {
  if (saved === undefined) delete process.env.SKIPQ_SCHEMA;
  else process.env.SKIPQ_SCHEMA = saved;
});

test("a client given no schema uses SKIPQ_SCHEMA, as the CLI does, and enqueues there", async () => {
  process.env.SKIPQ_SCHEMA = t.schema;
  const skipq = new Skipq({ connectionString: DATABASE_URL, logger: silentLogger });
  try {
    expect(skipq.schema).toBe(t.schema);
    const { id } = await skipq.enqueue("from-env", {});
    const { rows } = await t.db.query(`SELECT kind FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    expect(rows).toEqual([{ kind: "from-env" }]);
  } finally {
    await skipq.close();
  }
});

test("an explicit schema wins over SKIPQ_SCHEMA, and an empty SKIPQ_SCHEMA counts as unset", async () => {
  process.env.SKIPQ_SCHEMA = "from_env";
  const explicit = new Skipq({ connectionString: DATABASE_URL, schema: "chosen", logger: silentLogger });
  process.env.SKIPQ_SCHEMA = "";
  const fallback = new Skipq({ connectionString: DATABASE_URL, logger: silentLogger });
  expect([explicit.schema, fallback.schema]).toEqual(["chosen", "skipq"]);
  await Promise.all([explicit.close(), fallback.close()]);
});

test("a bad SKIPQ_SCHEMA is a ValidationError that names the variable", () => {
  process.env.SKIPQ_SCHEMA = "Robert'); DROP";
  expect(() => new Skipq({ connectionString: DATABASE_URL, logger: silentLogger })).toThrow(ValidationError);
  expect(() => new Skipq({ connectionString: DATABASE_URL, logger: silentLogger })).toThrow(/SKIPQ_SCHEMA/);
});
