/** The outbox, saga and adapter examples run against the real database and print what their docs say. */
import { afterAll, beforeAll, expect, test } from "vitest";
import { dropExampleSchemas, runExample } from "../helpers.js";
import { generatePrismaClient } from "../prismaClient.js";

let prismaClient = "";
beforeAll(async () => {
  prismaClient = await generatePrismaClient("examples");
}, 120_000);
afterAll(dropExampleSchemas);

test("examples/outbox.ts delivers a committed order's events to a signed webhook, in order per key", async () => {
  const out = await runExample("examples/outbox.ts");
  const delivered = (out.match(/delivered: (.*)/)?.[1] ?? "").split(", ");
  expect(delivered.sort()).toEqual(["order-42:paid", "order-42:shipped", "order-7:paid"]);
  expect(delivered.indexOf("order-42:paid")).toBeLessThan(delivered.indexOf("order-42:shipped"));
});

test("examples/saga.ts undoes the hotel, then the flight, when the car step dies", async () => {
  const out = await runExample("examples/saga.ts");
  expect(out).toContain("cancelled hotel H-1\ncancelled flight FL-ada\nsaga 1: compensated (no car available)");
});

test("examples/adapters.ts enqueues through postgres.js, Kysely, Drizzle and Knex, and a rollback leaves nothing", async () => {
  expect(await runExample("examples/adapters.ts")).toContain("enqueued via: postgres.js, kysely, drizzle, knex\n");
});

test("examples/prisma.ts enqueues inside prisma.$transaction", async () => {
  expect(await runExample("examples/prisma.ts", { PRISMA_CLIENT: prismaClient })).toMatch(
    /enqueued job \d+ via prisma/,
  );
});
