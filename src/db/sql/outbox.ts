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
import { RANDOM_LEASE } from "./jobs.js";

export function outboxStatements(names: Schema) {
  const schema = names.sql;
  const outbox = `${schema}.outbox`;
  /** Both claims: `heads` picks each key's head; runs, lease and RETURNING are shared ($2-$5). */
  const claimRuns = (heads: string) =>
    `WITH heads AS MATERIALIZED (
         ${heads}),
       runs AS MATERIALIZED (
         SELECT f.id FROM heads h
          CROSS JOIN LATERAL (
            SELECT e.id FROM ${outbox} e
             WHERE e.key = h.key AND e.delivered_at IS NULL AND e.id >= h.id
             ORDER BY e.id
             LIMIT least($4, greatest(1, $5::int / (SELECT count(*) FROM heads)))
             FOR UPDATE) f)
       UPDATE ${outbox} AS o
          SET attempts = o.attempts + 1, locked_by = $2, lease = ${RANDOM_LEASE},
              lease_expires_at = now() + $3::float8 * interval '1 millisecond'
        WHERE o.id = ANY (ARRAY(SELECT id FROM runs))
       RETURNING o.id, o.topic, o.key, o.event, o.headers, o.attempts, o.lease, o.created_at`;
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
       * undelivered event (its head) plus the events that follow it, up to $4
       * per key and, over all keys, about $5 (the pass's budget, shared evenly
       * by the keys claimed): one hot key gets long runs, many keys short ones,
       * and a pass stays short enough to finish within its delivery budget.
       *
       * A head is claimable only when no older undelivered event of its key
       * exists (the NOT EXISTS): that older event is in flight, waiting for a
       * retry, or not yet claimed, and in all three cases the key must wait.
       * Delivery is permanent, so "older event delivered" read from any snapshot
       * stays true. An expired lease is claimable again (its relay crashed).
       *
       * OFFSET 0 keeps the NOT EXISTS a per-candidate probe, walking
       * outbox_undelivered in id order and stopping at $1 heads. Without it
       * PostgreSQL makes it an anti join, whose hash compares every pair of a
       * hot key's events (290 ms per claim for 3,000 events of one key); as
       * `id = (SELECT min …)` the planner's guess of its selectivity made it scan
       * and sort every undelivered event (81 ms for 20,000). The ORDER BY (kept
       * because of the OFFSET) makes the probe an outbox_undelivered_key range
       * scan: on a table whose statistics say "one key", a sequential scan looked
       * as cheap, and walked every delivered row per probe (80 ms per claim for
       * 5,000 events of one key). See docs/performance.md, "The outbox relay".
       *
       * The followers of a head we hold cannot be claimed by anyone else (they
       * are not heads while ours is undelivered), so they are locked without
       * SKIP LOCKED; the relay delivers them after the head, in id order, and
       * stops at the first failure. MATERIALIZED keeps each LIMIT evaluated once.
       * The UPDATE takes the claimed ids as an array (`id = ANY`): rows by
       * primary key, where a join with the CTE planned a hash over the whole table.
       */
      outboxClaim: claimRuns(`SELECT o.id, o.key FROM ${outbox} o
          WHERE o.delivered_at IS NULL AND o.run_at <= now()
            AND (o.lease IS NULL OR o.lease_expires_at <= now())
            AND NOT EXISTS (SELECT 1 FROM ${outbox} e
                             WHERE e.key = o.key AND (e.key, e.id) < (o.key, o.id) AND e.delivered_at IS NULL
                             ORDER BY e.key, e.id OFFSET 0)
          ORDER BY o.id
          LIMIT $1
          FOR UPDATE SKIP LOCKED`),

      /**
       * The same claim for the keys $1 only (a relay continuing the keys whose
       * runs it just delivered), without the scan for heads: a key's head is its
       * first undelivered event, one outbox_undelivered_key probe. The scan
       * walks every undelivered event of keys that have no claimable head, so
       * on one hot key with a backlog it cost O(backlog) per pass (50 ms for
       * 5,000 events); the relay runs it at most once per pollInterval while it
       * has keys to continue and the last scan found fewer than batchSize keys.
       * Same head rule as above: no older undelivered event of the key exists
       * in this statement's snapshot, and ids of one key are in commit order.
       * `o.delivered_at IS NULL` is repeated on the locked row so that a row
       * delivered after the snapshot is re-checked on its newest version.
       */
      outboxClaimKeys: claimRuns(`SELECT o.id, o.key FROM unnest($1::text[]) AS k(key)
          CROSS JOIN LATERAL (SELECT e.id FROM ${outbox} e
                               WHERE e.key = k.key AND e.delivered_at IS NULL
                               ORDER BY e.key, e.id LIMIT 1) h
          JOIN ${outbox} o ON o.id = h.id
          WHERE o.delivered_at IS NULL AND o.run_at <= now()
            AND (o.lease IS NULL OR o.lease_expires_at <= now())
          FOR UPDATE OF o SKIP LOCKED`),

      /**
       * Mark delivered (fenced); returns the ids recorded. Besides its own lease,
       * an event is recorded only when every older undelivered event of its key
       * is recorded in this same statement under its lease: a relay whose expired
       * run was partly taken over (the new holder claimed fewer events) cannot
       * mark a later event delivered while an earlier one is not.
       *
       * `mine` is what the caller presents under a live lease; per key, the
       * `blocker` is the oldest undelivered event older than the key's last one
       * presented that is not among them, and only events before it are
       * recorded. `blockers` keeps only keys that have one (normally none), so
       * the final filter is a lookup in an empty set rather than a join of every
       * event with every key (140 ms for 10,000 events over 100 keys). One probe per key, so a run of 1,000
       * events of one key costs O(run), where a NOT EXISTS per event, each
       * re-reading the presented list, cost O(run²) (530 ms for 1,000).
       * The lease is compared again in the UPDATE itself, not only in `mine`:
       * a row whose lease moved on after this statement's snapshot is re-checked
       * on its newest version (a CTE is not), so fencing holds under concurrency.
       */
      outboxDeliveredMany: `WITH mine AS MATERIALIZED (
         SELECT o.id, o.key FROM ${outbox} o
           JOIN unnest($1::bigint[], $2::bigint[]) AS d(id, lease) ON o.id = d.id AND o.lease = d.lease
          WHERE o.id = ANY ($1::bigint[])),
       blockers AS MATERIALIZED (
         SELECT k.key, k.blocker FROM (
           SELECT m.key, (SELECT e.id FROM ${outbox} e
                           WHERE e.key = m.key AND e.delivered_at IS NULL AND e.id < max(m.id)
                             AND e.id NOT IN (SELECT id FROM mine)
                           ORDER BY e.id LIMIT 1) AS blocker
             FROM mine m GROUP BY m.key) k
          WHERE k.blocker IS NOT NULL)
       UPDATE ${outbox} AS o
          SET delivered_at = now(), lease = NULL, lease_expires_at = NULL, last_error = NULL
         FROM unnest($1::bigint[], $2::bigint[]) AS d(id, lease)
        WHERE o.id = ANY (ARRAY(SELECT m.id FROM mine m
                                 WHERE NOT EXISTS (SELECT 1 FROM blockers b WHERE b.key = m.key AND b.blocker < m.id)))
          AND o.id = d.id AND o.lease = d.lease
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
