/**
 * Typed job definitions. `defineJob` fixes a stable kind string and the
 * payload type once; enqueue and handler registration are generic over the
 * returned handle, so a wrong payload is a compile error. A Standard Schema
 * validator (zod, valibot, arktype, ...) can supply both the type and a
 * runtime check, applied at enqueue and again before the handler runs.
 */

import { PayloadInvalidError } from "./errors.js";
import type { StandardSchemaV1 } from "./standardSchema.js";
import { assertInt, assertName } from "./validate.js";

export interface JobDefaults {
  /** Queue to enqueue into. Default "default". */
  queue?: string;
  /** Higher runs first; -32768..32767. Default 0. */
  priority?: number;
  /** Attempts before the job is dead; at least 1. Default 10. */
  maxAttempts?: number;
}

export interface JobDefinition<Payload, Result = unknown> extends Readonly<JobDefaults> {
  readonly kind: string;
  readonly schema?: StandardSchemaV1<unknown, Payload>;
  /** Phantom field carrying the payload type; never set at run time. */
  readonly __payload?: Payload;
  /** Phantom field carrying the result type (what the handler returns); never set at run time. */
  readonly __result?: Result;
}

/** The payload type of a job definition. */
export type PayloadOf<J> = J extends JobDefinition<infer P> ? P : unknown;

/** The result type of a job definition (what its handler returns, and `enqueueAndWait` resolves with). */
export type ResultOf<J> = J extends JobDefinition<unknown, infer R> ? R : unknown;

/**
 * Define a job kind with an explicit payload type, and optionally its result type (what the handler
 * must return, and `enqueueAndWait` resolves with): `defineJob<{ to: string }, { messageId: string }>("send-email")`.
 */
export function defineJob<Payload, Result = unknown>(
  kind: string,
  defaults?: JobDefaults,
): JobDefinition<Payload, Result>;
/**
 * Define a job kind whose payload type and runtime check come from a Standard Schema validator; a result
 * type may follow the schema's: `defineJob<typeof schema, { url: string }>("resize", { schema })`.
 */
export function defineJob<Schema extends StandardSchemaV1, Result = unknown>(
  kind: string,
  defaults: JobDefaults & { schema: Schema },
): JobDefinition<StandardSchemaV1.InferOutput<Schema>, Result>;
export function defineJob(
  kind: string,
  defaults: JobDefaults & { schema?: StandardSchemaV1 } = {},
): JobDefinition<unknown> {
  assertName("kind", kind);
  if (defaults.queue !== undefined) assertName("queue", defaults.queue);
  if (defaults.priority !== undefined) assertInt("priority", defaults.priority, -32768, 32767);
  if (defaults.maxAttempts !== undefined) assertInt("maxAttempts", defaults.maxAttempts, 1, 1_000_000);
  return Object.freeze({ ...defaults, kind });
}

/** Validates a payload against a definition's schema, if it has one. Returns the (possibly transformed) value. */
export async function validatePayload(
  definition: { kind: string; schema?: StandardSchemaV1 | undefined },
  payload: unknown,
): Promise<unknown> {
  if (!definition.schema) return payload;
  let result = definition.schema["~standard"].validate(payload);
  if (result instanceof Promise) result = await result;
  if (result.issues) throw new PayloadInvalidError(definition.kind, result.issues);
  return result.value;
}
