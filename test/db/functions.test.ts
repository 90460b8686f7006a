/**
 * The SQL functions generated in TypeScript are the ones the migrations
 * install: the last migration that (re)defines each one holds exactly the text
 * its generator produces. Change the generator, add a migration with its new
 * text (`npx tsx scripts/functions.mts <name>` prints it).
 */
import { expect, test } from "vitest";
import { loadMigrations } from "../../src/db/migrate.js";
import { generatedFunctions } from "../../src/db/sql/functions.js";

/**
 * Every CREATE [OR REPLACE] FUNCTION statement of `sql`, keyed by its head (name and parameter list, spaces
 * collapsed, so two signatures of one name are two entries): the whole statement, up to its body's closing tag.
 */
function definitions(sql: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const m of sql.matchAll(/CREATE (?:OR REPLACE )?FUNCTION (\w+)\(([^)]*)\)[\s\S]*?\bAS (\$\w*\$)[\s\S]*?\3;/g)) {
    found.set(`${m[1]}(${(m[2] ?? "").replace(/\s+/g, " ").trim()})`, m[0]);
  }
  return found;
}

/** The generated definitions whose latest definition in `migrations` is not exactly their text, by head. */
function stale(migrations: readonly { sql: string }[], generated: Record<string, string>): string[] {
  const latest = new Map<string, string>();
  for (const m of migrations) for (const [head, text] of definitions(m.sql)) latest.set(head, text);
  const out: string[] = [];
  for (const texts of Object.values(generated)) {
    for (const [head, text] of definitions(texts)) if (latest.get(head) !== text) out.push(head);
  }
  return out;
}

test("every generated function's last definition in the migrations is the generator's text", () => {
  const migrations = loadMigrations();
  for (const [name, text] of Object.entries(generatedFunctions())) {
    const last = migrations.filter((m) => m.sql.includes(`FUNCTION ${name}(`)).at(-1);
    expect(last, `a migration defines ${name}`).toBeDefined();
    expect(last?.sql, `${last?.name} holds the generated ${name}`).toContain(text);
  }
});

test("the latest migration's definition of each generated function, signature by signature, equals the generated text", () => {
  const generated = generatedFunctions();
  const heads = Object.values(generated).flatMap((texts) => [...definitions(texts).keys()]);
  // Both skipq_complete signatures, and every other generated function, are checked one by one.
  expect(heads).toContain("skipq_complete(job_id bigint, job_lease bigint)");
  expect(heads).toContain("skipq_complete(job_id bigint, job_lease bigint, job_result jsonb)");
  expect(heads.length).toBeGreaterThanOrEqual(Object.keys(generated).length + 1);
  expect(stale(loadMigrations(), generated)).toEqual([]);
});

test("a builder change without a migration fails the check", () => {
  const generated = generatedFunctions();
  const changed = {
    ...generated,
    skipq_fail: generated.skipq_fail?.replace("j.attempts < j.max_attempts", "j.attempts <= j.max_attempts") ?? "",
  };
  expect(changed.skipq_fail).not.toBe(generated.skipq_fail);
  expect(stale(loadMigrations(), changed)).toEqual([
    "skipq_fail(job_id bigint, job_lease bigint, error text, delay_ms double precision)",
  ]);
});
