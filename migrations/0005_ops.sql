-- 0005: what operations tools need — a presence table of live workers (for
-- "pending jobs of a kind no worker handles") and an index for the
-- throughput chart.

-- One row per running worker, upserted on an interval off the claim path and
-- deleted on a clean stop. A row whose expires_at has passed belongs to a
-- worker that died without stopping; the health check ignores it and the next
-- presence upsert of any worker deletes it after an hour.
CREATE TABLE workers (
  id           text PRIMARY KEY,
  queues       text[]      NOT NULL,
  kinds        text[]      NOT NULL,
  hostname     text,
  pid          integer,
  started_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);

-- Throughput over the last hour counts completions per minute; without this
-- index that is a scan of the whole history. Partial, so pending and running
-- rows (NULL completed_at) add nothing to it: the cost is one index entry per
-- completion. queue is the second column so the per-queue counts are
-- index-only scans too.
CREATE INDEX jobs_completed_at ON jobs (completed_at, queue) WHERE completed_at IS NOT NULL;
