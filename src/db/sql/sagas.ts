/**
 * Saga statements: create, read, move one saga forward or backward, and find
 * sagas whose current job died outside a handler.
 *
 * Invariants owned here: every transition is guarded by the (status,
 * current_step) it expects, so a step job that runs twice (at-least-once) or
 * a sweeper racing a handler moves a saga at most once; a transition and the
 * job it enqueues commit together.
 */
import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function sagaStatements(names: Schema) {
  const schema = names.sql;
  const sagas = `${schema}.sagas`;
  return statements(
    names,
    { prepare: true },
    {
      sagaInsert: `INSERT INTO ${sagas} (name, input, steps) VALUES ($1, $2::jsonb, $3::jsonb) RETURNING id`,

      /** Record the first step's job (same transaction as the insert). */
      sagaSetJob: `UPDATE ${sagas} SET current_job_id = $2 WHERE id = $1`,

      sagaGet: `SELECT id, name, status, input, steps, current_step, current_job_id, error, created_at, updated_at
         FROM ${sagas} WHERE id = $1`,

      /**
       * sagaGet, locking the saga until the transaction ends: a transition that chooses the next compensation
       * from the steps' states reads them under this lock, so a step marked as run meanwhile (an action that
       * returned after its step was failed) is either seen by that choice or sees the transition's result.
       */
      sagaLock: `SELECT id, name, status, input, steps, current_step, current_job_id, error, created_at, updated_at
         FROM ${sagas} WHERE id = $1 FOR UPDATE`,

      /**
       * Move saga $1 from (status $2, step $3): merge $5 into step $4's entry, set
       * status $6, step $7, job $8, error $9. $10, when given, must be the current
       * job (the sweeper's guard). No row back = someone else moved it first.
       */
      sagaTransition: `UPDATE ${sagas}
          SET steps = jsonb_set(steps, ARRAY[$4::int::text], (steps -> $4::int) || $5::jsonb),
              status = $6, current_step = $7, current_job_id = $8::bigint, error = COALESCE($9, error),
              updated_at = now()
        WHERE id = $1 AND status = $2 AND current_step = $3
          AND ($10::bigint IS NULL OR current_job_id = $10::bigint)
       RETURNING id`,

      /**
       * Live sagas whose current job is dead or cancelled: the reaper buried it
       * (attempts used up while no handler was there to notice) or an operator
       * cancelled it. Joins through sagas_live, a small partial index.
       */
      sagaStuck: `SELECT s.id, s.name, s.status, s.current_step, s.current_job_id, j.last_error
         FROM ${sagas} s JOIN ${schema}.job_history j ON j.id = s.current_job_id
        WHERE s.status IN ('running', 'compensating') AND j.status IN ('dead', 'cancelled')
        ORDER BY s.id LIMIT $1`,
    },
  );
}

export type SagaStatements = ReturnType<typeof sagaStatements>;
