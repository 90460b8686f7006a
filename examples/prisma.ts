/**
 * Prisma 7: enqueue inside `prisma.$transaction`. PrismaClient is generated
 * code; this example loads the model-less client that the test suite generates
 * from test/fixtures/prisma/schema.prisma (`prisma generate`), so use your own
 * `import { PrismaClient } from "./generated/prisma/client"` instead.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/prisma.ts
 */
import path from "node:path";
import { PrismaPg } from "@prisma/adapter-pg";
import { type PrismaLike, prismaQueryable, Skipq } from "skipq";

type Client = PrismaLike & {
  $transaction<T>(body: (tx: PrismaLike) => Promise<T>): Promise<T>;
  $disconnect(): Promise<void>;
};
const generated = path.resolve(process.env.PRISMA_CLIENT ?? ".cache/prisma-examples/client/client.ts");
const { PrismaClient } = (await import(generated)) as { PrismaClient: new (o: { adapter: unknown }) => Client };

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });

const job = await prisma.$transaction(async (tx) => {
  // … await tx.order.create(…) with your models …
  return skipq.enqueueTx(prismaQueryable(tx), "welcome", { via: "prisma" });
});
console.log(`enqueued job ${job.id} via prisma`);
await prisma.$disconnect();
await skipq.close();
