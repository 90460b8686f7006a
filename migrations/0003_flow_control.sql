-- 0003: flow control and scheduling — priority aging, concurrency and rate
-- limits, key pauses, cron state, and the retention index.
-- Runs with search_path set to the skipq schema, in one transaction.

-- A tenant/customer key set at enqueue; per-key limits and pauses apply to it.
-- NULL means "no key": only queue-wide limits apply.
ALTER TABLE jobs ADD COLUMN concurrency_key text;

-- Priority aging: the claim's second ordered scan, oldest runnable first, so a
-- job that waited longer than the aging threshold is found by an index scan
-- that stops after LIMIT rows (a now()-dependent expression cannot be indexed).
CREATE INDEX jobs_pending_age ON jobs (run_at, id) WHERE status = 'pending';

-- Running jobs per (queue, key), for per-key concurrency limits. Only keyed
-- rows, so jobs without a key (the common case) pay no extra index insert.
CREATE INDEX jobs_running_key ON jobs (queue, concurrency_key) WHERE status = 'running' AND concurrency_key IS NOT NULL;

-- Retention: terminal rows by age, so the pruner's small batches are index
-- scans whatever the table size (it never looks at pending or running rows).
CREATE INDEX jobs_terminal_age ON jobs (status, updated_at) WHERE status IN ('completed', 'dead', 'cancelled');

-- Limits live in the database, so every worker enforces the same ones.
ALTER TABLE queues
  ADD COLUMN concurrency_limit integer CHECK (concurrency_limit >= 1),
  ADD COLUMN key_concurrency_limit integer CHECK (key_concurrency_limit >= 1),
  ADD COLUMN rate_limit integer CHECK (rate_limit >= 1),
  ADD COLUMN rate_window_ms double precision CHECK (rate_window_ms >= 1),
  ADD COLUMN rate_per_key boolean NOT NULL DEFAULT false,
  -- The latest paused_until of any key in this queue: while it is in the
  -- future, claims from this queue take the limited path that checks keys.
  ADD COLUMN keys_paused_until timestamptz,
  ADD COLUMN limited boolean GENERATED ALWAYS AS (
    concurrency_limit IS NOT NULL OR key_concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL) STORED,
  ADD CONSTRAINT queues_rate_check CHECK ((rate_limit IS NULL) = (rate_window_ms IS NULL));

-- "Pause this key until T" (e.g. a provider's Retry-After), per queue.
CREATE TABLE queue_keys (
  queue        text        NOT NULL,
  key          text        NOT NULL,
  paused_until timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, key)
);

-- Starts inside the current rate window (a sliding log, trimmed by the claim).
-- Written only for rate-limited queues, under the queue's claim lock.
CREATE TABLE rate_starts (
  queue      text        NOT NULL,
  key        text,
  started_at timestamptz NOT NULL
);
CREATE INDEX rate_starts_window ON rate_starts (queue, started_at);

-- Cron schedules declared in code: the last tick enqueued, so a restarted
-- scheduler can backfill missed ticks (bounded) and never repeats one.
CREATE TABLE cron_schedules (
  name        text PRIMARY KEY,
  expression  text        NOT NULL,
  timezone    text,
  queue       text        NOT NULL,
  kind        text        NOT NULL,
  last_tick   timestamptz NOT NULL,
  last_job_id bigint,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
