/**
 * One transaction on a pooled connection: BEGIN, the body, COMMIT — or
 * ROLLBACK when the body throws. A connection whose transaction failed is
 * discarded rather than returned to the pool (it may be broken mid-protocol),
 * and its 'error' events during the transaction are absorbed, so a server
 * restart between two statements fails the body instead of the process.
 */
import type pg from "pg";

export async function withTransaction<T>(pool: pg.Pool, body: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failure: Error | undefined;
  const onError = (error: Error) => {
    failure ??= error;
  };
  client.on("error", onError);
  try {
    await client.query("BEGIN");
    const result = await body(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    failure ??= error as Error;
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.removeListener("error", onError);
    client.release(failure);
  }
}
