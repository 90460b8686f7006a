-- 0019: the SQL protocol's functions never JIT-compile (SPEC §9). Their
-- statements are planned inside the function, where PostgreSQL cannot see
-- the caller's values: skipq_claim's plan was costed at 135,060 (a queue it
-- could not see, 478k rows estimated), over jit_above_cost, and JIT took 32 ms
-- of a 40 ms call that read 19 buffers. SET jit = off on each function holds
-- whatever the caller's session says. skipq's own connections also start with
-- jit off (src/db/pool.ts); a worker in another language gets this from the
-- functions themselves. skipq_error_fingerprint keeps no setting: it is a
-- plain SQL expression the planner inlines into the statements that call it.
ALTER FUNCTION skipq_claim(text[], integer, text, double precision) SET jit = off;
ALTER FUNCTION skipq_complete(bigint, bigint) SET jit = off;
ALTER FUNCTION skipq_complete(bigint, bigint, jsonb) SET jit = off;
ALTER FUNCTION skipq_fail(bigint, bigint, text, double precision) SET jit = off;
ALTER FUNCTION skipq_heartbeat(bigint, bigint, double precision) SET jit = off;
ALTER FUNCTION skipq_release(bigint, bigint) SET jit = off;
ALTER FUNCTION skipq_parents_finished(bigint[], text[]) SET jit = off;
ALTER FUNCTION skipq_parents_lock(bigint[]) SET jit = off;
ALTER FUNCTION skipq_link(bigint[], bigint[]) SET jit = off;
ALTER FUNCTION skipq_parents_retried(bigint[]) SET jit = off;
ALTER FUNCTION skipq_history_partition(text, timestamptz, timestamptz) SET jit = off;
ALTER FUNCTION skipq_history_drop(text, timestamptz) SET jit = off;
