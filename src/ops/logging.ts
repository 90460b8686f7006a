/**
 * Structured JSON logs through pino: `createLogger()` returns a pino logger
 * that is also a skipq `Logger`, so `new Skipq({ logger: createLogger() })`
 * logs one JSON line per event; handlers' `ctx.log` is a child carrying
 * `jobId`, `kind` and `attempt`, and worker lines carry `worker`.
 * Errors under `err` are serialised with message, type and stack.
 */
import pino from "pino";
import type { Logger } from "../core/logger.js";

export interface CreateLoggerOptions {
  /** Lowest level written. Default: `LOG_LEVEL`, else "info". */
  level?: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /** Where lines go. Default: stdout. */
  destination?: pino.DestinationStream;
  /** Fields on every line. Default: { name: "skipq" } (pid and hostname are added by pino). */
  base?: Record<string, unknown>;
  /** Paths whose values are replaced by "[redacted]", e.g. ["payload.password"]. Default: none. */
  redact?: string[];
}

/** A pino logger usable wherever skipq takes a `Logger`. */
export function createLogger(options: CreateLoggerOptions = {}): pino.Logger & Logger {
  const level = options.level ?? (process.env.LOG_LEVEL as CreateLoggerOptions["level"]) ?? "info";
  const config: pino.LoggerOptions = {
    level,
    base: { name: "skipq", pid: process.pid, ...options.base },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: pino.stdSerializers.err },
  };
  if (options.redact) config.redact = options.redact;
  return options.destination ? pino(config, options.destination) : pino(config);
}
