import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const run = promisify(execFile);

test("importing skipq loads no optional driver (amqplib, nats, postgres.js, Kysely, Drizzle, Knex, Prisma)", async () => {
  const script = `
    const skipq = await import("./dist/src/index.js");
    for (const name of ["Outbox", "webhookSink", "rabbitmqSink", "natsSink", "postgresJsQueryable", "kyselyQueryable",
                        "drizzleQueryable", "knexQueryable", "prismaQueryable"]) {
      if (typeof skipq[name] !== "function") throw new Error(name + " is not exported");
    }
    // Creating sinks is lazy too: the broker client loads on first delivery.
    skipq.rabbitmqSink({ url: "amqp://127.0.0.1", exchange: "x" });
    skipq.natsSink({ servers: "127.0.0.1:4222" });
    console.log("ok");`;
  const { stdout } = await run(process.execPath, [
    "--import",
    "./test/fixtures/forbid-drivers.mjs",
    "--input-type=module",
    "-e",
    script,
  ]);
  expect(stdout.trim()).toBe("ok");
  // The guard itself works: resolving a driver under it fails.
  await expect(
    run(process.execPath, [
      "--import",
      "./test/fixtures/forbid-drivers.mjs",
      "--input-type=module",
      "-e",
      'await import("knex")',
    ]),
  ).rejects.toThrow(/optional driver loaded at import time: knex/);
});
