/**
 * The SQL functions generated in TypeScript are the ones the migrations
 * install: the last migration that (re)defines each one holds exactly the text
 * its generator produces. Change the generator, add a migration with its new
 * text (`npx tsx scripts/functions.mts <name>` prints it).
 */
import { expect, test } from "vitest";
import { loadMigrations } from "../../src/db/migrate.js";
import { generatedFunctions } from "../../src/db/sql/functions.js";

test("every generated function's last definition in the migrations is the generator's text", () => {
  const migrations = loadMigrations();
  for (const [name, text] of Object.entries(generatedFunctions())) {
    const last = migrations.filter((m) => m.sql.includes(`FUNCTION ${name}(`)).at(-1);
    expect(last, `a migration defines ${name}`).toBeDefined();
    expect(last?.sql, `${last?.name} holds the generated ${name}`).toContain(text);
  }
});
