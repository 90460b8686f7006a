-- 0014: dashboard v2. Per-queue one-minute statistics written by the
-- maintainer (the dashboard's charts read them, never the history), the
-- dashboard's audit trail, and pausable cron schedules. Independent of every
-- other migration: it adds two tables and one nullable column.

-- One row per queue and minute (bucket = the minute's start, UTC). The
-- maintainer's leader fills closed minutes from job_history (through its BRIN
-- index on finished_at) and samples the depth of the current minute; rows
-- older than 7 days are deleted by the same pass. Wait is run_at → locked_at
-- of each finished job's last attempt, in milliseconds.
CREATE TABLE queue_stats_minute (
  queue       text        NOT NULL,
  bucket      timestamptz NOT NULL,
  completed   integer     NOT NULL DEFAULT 0,
  failed      integer     NOT NULL DEFAULT 0,
  cancelled   integer     NOT NULL DEFAULT 0,
  -- Runnable pending jobs and running jobs when the minute was last sampled; NULL when never sampled.
  depth       integer,
  running     integer,
  wait_p50_ms double precision,
  wait_p95_ms double precision,
  -- The minute's finishes are counted (it ended before a rollup pass); the
  -- newest closed bucket is where the next pass starts.
  closed      boolean     NOT NULL DEFAULT false,
  PRIMARY KEY (queue, bucket)
);
-- Retention deletes by age across queues.
CREATE INDEX queue_stats_minute_bucket ON queue_stats_minute (bucket);

-- Every dashboard action (and every sign-in and sign-out): who, what, when,
-- from where. Appended by the dashboard, read by its audit page newest first.
CREATE TABLE dashboard_audit (
  id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  principal  text        NOT NULL,
  role       text        NOT NULL,
  action     text        NOT NULL,
  target     text,
  detail     jsonb,
  client     text,
  user_agent text
);

-- A paused schedule enqueues no tick until resumed; the ticks it missed
-- meanwhile are skipped, not caught up. A run requested from the dashboard is
-- enqueued by the next pass of a scheduler that declares the schedule (only
-- the code knows its payload), once, then cleared.
ALTER TABLE cron_schedules ADD COLUMN paused_at timestamptz, ADD COLUMN run_requested_at timestamptz;
