/**
 * The outbox's statements: publish (inside the caller's transaction) and the
 * relay's claim / delivered / failed path, on one screen.
 *
 * Invariants owned here:
 * - a key is claimable only through its oldest undelivered event, so a key is
 *   held by at most one relay at a time and its events leave in id order;
 * - publishers of one key are serialised until commit, so id order per key is
 *   commit order (a later id of a key never becomes visible before an earlier one);
 * - marking delivered or failed presents the claim's lease (fencing), like jobs.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function outboxStatements(names: Schema) {
  const schema = names.sql;
  const outbox = `${schema}.outbox`;
  return statements(
    names,
    { prepare: true },
    {
      /**
       * Publish one event. The transaction-scoped advisory lock on (schema, key)
       * makes a second publisher of the same key wait until the first commits or
       * rolls back, so identity ids of one key are handed out in commit order.
       * Without it, T1 (id 10) committing after T2 (id 11) would let the relay
       * deliver 11 before 10 exists. The lock is taken in the CTE, before the
       * INSERT draws its id from the sequence.
       */
      outboxInsert: `WITH serialised AS (SELECT pg_advisory_xact_lock(hashtext($5), hashtext($2)))
       INSERT INTO ${outbox} (topic, key, event, headers)
       SELECT $1, $2, $3::jsonb, $4::jsonb FROM serialised
       RETURNING id`,

      /**
       * Claim up to $1 keys for relay $2, leased for $3 ms: each key's oldest
       * undelivered event (its head) plus up to $4 - 1 events that follow it.
       *
       * A head is claimable only when no older undelivered event of its key
       * exists (the NOT EXISTS): that older event is in flight, waiting for a
       * retry, or not yet claimed, and in all three cases the key must wait.
       * Delivery is permanent, so "older event delivered" read from any snapshot
       * stays true. An expired lease is claimable again (its relay crashed).
       *
       * The followers of a head we hold cannot be claimed by anyone else (they
       * are not heads while ours is undelivered), so they are locked without
       * SKIP LOCKED; the relay delivers them after the head, in id order, and
       * stops at the first failure. MATERIALIZED keeps each LIMIT evaluated once.
       */
      outboxClaim: `WITH heads AS MATERIALIZED (
         SELECT o.id, o.key FROM ${outbox} o
          WHERE o.delivered_at IS NULL AND o.run_at <= now()
            AND (o.lease IS NULL OR o.lease_expires_at <= now())
            AND NOT EXISTS (SELECT 1 FROM ${outbox} e
                             WHERE e.key = o.key AND e.id < o.id AND e.delivered_at IS NULL)
          ORDER BY o.id
          LIMIT $1
          FOR UPDATE SKIP LOCKED),
       runs AS MATERIALIZED (
         SELECT f.id FROM heads h
          CROSS JOIN LATERAL (
            SELECT e.id FROM ${outbox} e
             WHERE e.key = h.key AND e.delivered_at IS NULL AND e.id >= h.id
             ORDER BY e.id
             LIMIT $4
             FOR UPDATE) f)
       UPDATE ${outbox} AS o
          SET attempts = o.attempts + 1, locked_by = $2, lease = pg_current_xact_id()::text::bigint,
              lease_expires_at = now() + $3::float8 * interval '1 millisecond'
         FROM runs WHERE o.id = runs.id
       RETURNING o.id, o.topic, o.key, o.event, o.headers, o.attempts, o.lease, o.created_at`,

      /**
       * Mark delivered (fenced); returns the ids recorded. Besides its own lease,
       * an event is recorded only when every older undelivered event of its key
       * is recorded in this same statement under its lease: a relay whose expired
       * run was partly taken over (the new holder claimed fewer events) cannot
       * mark a later event delivered while an earlier one is not. `id = ANY ($1)`
       * here and below: rows by primary key, not a hash join over the whole table.
       */
      outboxDeliveredMany: `UPDATE ${outbox} AS o
          SET delivered_at = now(), lease = NULL, lease_expires_at = NULL, last_error = NULL
         FROM unnest($1::bigint[], $2::bigint[]) AS d(id, lease)
        WHERE o.id = ANY ($1::bigint[]) AND o.id = d.id AND o.lease = d.lease
          AND NOT EXISTS (SELECT 1 FROM ${outbox} e
                           WHERE e.key = o.key AND e.id < o.id AND e.delivered_at IS NULL
                             AND NOT EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::bigint[]) AS m(id, lease)
                                              WHERE m.id = e.id AND m.lease = e.lease))
       RETURNING o.id`,

      /** Record failed attempts (fenced): retry after each event's own backoff. */
      outboxFailedMany: `UPDATE ${outbox} AS o
          SET lease = NULL, lease_expires_at = NULL, last_error = d.error,
              run_at = now() + d.delay_ms * interval '1 millisecond'
         FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::float8[]) AS d(id, lease, error, delay_ms)
        WHERE o.id = ANY ($1::bigint[]) AND o.id = d.id AND o.lease = d.lease
       RETURNING o.id`,

      /** Hand back events claimed but not attempted (behind a failure in their run); the attempt is not counted. */
      outboxReleaseMany: `UPDATE ${outbox} AS o
          SET lease = NULL, lease_expires_at = NULL, attempts = o.attempts - 1
         FROM unnest($1::bigint[], $2::bigint[]) AS d(id, lease)
        WHERE o.id = ANY ($1::bigint[]) AND o.id = d.id AND o.lease = d.lease
       RETURNING o.id`,

      /** Undelivered count and the age of the oldest, for monitoring. */
      outboxBacklog: `SELECT count(*)::int AS undelivered,
              COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)) * 1000, 0)::float8 AS oldest_ms
         FROM ${outbox} WHERE delivered_at IS NULL`,

      /** Delete up to $2 events delivered more than $1 ms ago (small batches keep locks short). */
      outboxPrune: `DELETE FROM ${outbox} WHERE id IN (
         SELECT id FROM ${outbox}
          WHERE delivered_at IS NOT NULL AND delivered_at < now() - $1::float8 * interval '1 millisecond'
          LIMIT $2)`,
    },
  );
}

export type OutboxStatements = ReturnType<typeof outboxStatements>;
