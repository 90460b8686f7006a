/**
 * What skipq needs of a connection: node-postgres's `query(config)`. A Pool,
 * a Client, a PoolClient, or a driver adapter (src/adapters) all fit, so every
 * mutating call can run inside the caller's own transaction.
 */
export interface Queryable {
  // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: any[]; rowCount: number | null }>;
}
