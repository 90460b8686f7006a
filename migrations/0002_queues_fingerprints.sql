-- 0002: queue settings (pause/resume), error fingerprints for the dead-letter
-- tools, and job headers (small string metadata such as a W3C trace context).

-- One row per queue that has settings; a queue without a row is simply active.
CREATE TABLE queues (
  name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
  paused_at  timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A stable fingerprint of the last error (kind + normalised message), so dead
-- jobs that failed the same way can be listed and retried together.
ALTER TABLE jobs ADD COLUMN error_fingerprint text;
CREATE INDEX jobs_dead_fingerprint ON jobs (queue, error_fingerprint) WHERE status = 'dead';

-- Headers travel with the job from enqueue to handler (e.g. traceparent), kept
-- apart from the payload so tools can read them without parsing user data.
ALTER TABLE jobs ADD COLUMN headers jsonb;
