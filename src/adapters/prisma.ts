/**
 * Prisma adapter: a `Queryable` from a PrismaClient or the `tx` of
 * `prisma.$transaction(async (tx) => …)`, through `$queryRawUnsafe` with
 * positional parameters. int8 results (bigint in Prisma) become strings, as
 * skipq's ids are. Takes the client structurally; never imports `@prisma/client`.
 */
import type { Queryable } from "../skipq.js";
import { bigintsToStrings, type QueryConfig, textJsonCasts } from "./shared.js";

/** The part of Prisma skipq uses. */
export interface PrismaLike {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/** `skipq.enqueueTx(prismaQueryable(tx), …)` inside `prisma.$transaction(async (tx) => …)`. */
export function prismaQueryable(tx: PrismaLike): Queryable {
  return {
    async query(config: QueryConfig) {
      const rows = (await tx.$queryRawUnsafe(textJsonCasts(config.text), ...(config.values ?? []))) as Array<
        Record<string, unknown>
      >;
      // $queryRawUnsafe returns rows, not a count; skipq's statements read counts from RETURNING rows.
      // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
      return { rows: bigintsToStrings(rows) as any[], rowCount: rows.length };
    },
  };
}
