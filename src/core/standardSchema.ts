/**
 * The Standard Schema v1 interface (https://standardschema.dev), the part skipq uses: a validator
 * (zod, valibot, arktype, ...) exposes `~standard.validate` and its inferred types. Copied here, as
 * the spec invites, rather than imported from `@standard-schema/spec`: the published .d.ts files
 * must only name packages a user installs, and a types-only dependency for 40 lines is not worth
 * one. It is structural, so any validator implementing the spec matches it. Never change its shape
 * (the spec guarantees v1 is stable); test/core/types.test-d.ts checks zod against it.
 */

/** A Standard Schema validator taking `Input` and producing `Output`. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

export declare namespace StandardSchemaV1 {
  interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown, options?: Options | undefined) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  interface Options {
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }
  type Result<Output> = SuccessResult<Output> | FailureResult;
  interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  interface PathSegment {
    readonly key: PropertyKey;
  }
  interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  type InferInput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["input"];
  type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["output"];
}
