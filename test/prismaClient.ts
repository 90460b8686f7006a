/**
 * Generates a model-less Prisma 7 client (for the adapter test and
 * examples/prisma.ts) into .cache/prisma-<label>/client (git-ignored); one
 * directory per caller, so test files running in parallel never share one.
 * `prisma generate` needs no engine, but the CLI still tries to download the
 * schema engine first; pointing PRISMA_SCHEMA_ENGINE_BINARY at a stub skips
 * that, so it works offline.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";

/** Returns the path of the generated client module. */
export async function generatePrismaClient(label: string): Promise<string> {
  const dir = path.resolve(`.cache/prisma-${label}`);
  mkdirSync(dir, { recursive: true });
  const schema = readFileSync("test/fixtures/prisma/schema.prisma", "utf8").replace(
    /output\s*=\s*"[^"]*"/,
    'output = "./client"',
  );
  writeFileSync(path.join(dir, "schema.prisma"), schema);
  await promisify(execFile)(
    path.resolve("node_modules/.bin/prisma"),
    ["generate", "--schema", path.join(dir, "schema.prisma")],
    {
      env: {
        ...process.env,
        PRISMA_SCHEMA_ENGINE_BINARY: "/bin/false",
        PRISMA_ENGINES_CHECKSUM_IGNORE_MISSING: "1",
        PRISMA_HIDE_UPDATE_MESSAGE: "1",
      },
      timeout: 120_000,
    },
  );
  return path.join(dir, "client/client.ts");
}
