-- 0001: the jobs table, its claim and reaper indexes.
-- Runs with search_path set to the skipq schema, inside one transaction with
-- its version row (see src/migrate.ts).

CREATE TABLE jobs (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue            text        NOT NULL DEFAULT 'default',
  kind             text        NOT NULL,
  payload          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  idempotency_key  text,
  status           text        NOT NULL DEFAULT 'pending',
  priority         smallint    NOT NULL DEFAULT 0,
  attempts         integer     NOT NULL DEFAULT 0,
  max_attempts     integer     NOT NULL DEFAULT 10,
  run_at           timestamptz NOT NULL DEFAULT now(),
  -- The lease: who holds a running job, until when, and the fencing token every
  -- later transition must present. lease is the id of the claiming
  -- transaction, unique per claim, so a worker whose lease was reaped cannot
  -- overwrite the outcome of the next holder.
  locked_at        timestamptz,
  locked_by        text,
  lease            bigint,
  lease_expires_at timestamptz,
  last_error       text,
  completed_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT jobs_status_check CHECK (status IN ('pending', 'running', 'completed', 'dead', 'cancelled')),
  CONSTRAINT jobs_queue_check CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
  CONSTRAINT jobs_kind_check CHECK (kind ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
  CONSTRAINT jobs_attempts_check CHECK (attempts >= 0 AND max_attempts >= 1),
  CONSTRAINT jobs_lease_check CHECK ((status = 'running') = (lease IS NOT NULL))
);

-- The claim's index: only pending rows, in the claim's ORDER BY, so a claim is
-- an index scan that stops after LIMIT rows however long the history grows.
CREATE INDEX jobs_pending_claim ON jobs (priority DESC, run_at, id) WHERE status = 'pending';

-- The reaper's index: only running rows, by when their lease runs out.
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE status = 'running';

-- Idempotency: one job per (queue, key). Partial, so keyless jobs cost nothing here.
CREATE UNIQUE INDEX jobs_idempotency ON jobs (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- A queue table is updated constantly; vacuum it often and early so dead
-- tuples never pile up in front of the claim's index scan.
ALTER TABLE jobs SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.05,
  autovacuum_vacuum_cost_delay = 0
);
