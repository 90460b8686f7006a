-- The worker protocol from psql: enqueue, claim, heartbeat, complete — what
-- workers/python/worker.py and workers/go/main.go do in a loop.
-- Run: PGOPTIONS=-csearch_path=skipq psql -X -v ON_ERROR_STOP=1 "$DATABASE_URL" -f examples/protocol.sql

-- Enqueue with plain SQL: every column but kind has a default.
INSERT INTO jobs (kind, payload, queue) VALUES ('polyglot.echo', '{"hello": "sql"}', 'psql');

-- Claim one job for five minutes; keep its id and lease (the fencing token).
SELECT id, lease, kind, payload FROM skipq_claim(ARRAY['psql'], 1, 'psql-session', 300000) \gset

-- … do the work, extending the lease while it runs …
SELECT skipq_heartbeat(:id, :lease, 300000) AS still_held \gset

-- Record the outcome under the lease: true = recorded.
SELECT skipq_complete(:id, :lease) AS completed \gset
\echo kind=:kind payload=:payload still_held=:still_held completed=:completed

-- The same lease again is stale now: nothing changes.
SELECT skipq_complete(:id, :lease) AS again \gset
\echo again=:again
