/**
 * The logger interface skipq writes to: pino-compatible (object first, then
 * message), so a pino logger can be passed as is. The default writes warnings
 * and errors to stderr as one JSON line each and drops the rest.
 */

export interface Logger {
  debug(obj: Record<string, unknown>, msg?: string): void;
  info(obj: Record<string, unknown>, msg?: string): void;
  warn(obj: Record<string, unknown>, msg?: string): void;
  error(obj: Record<string, unknown>, msg?: string): void;
  child?(bindings: Record<string, unknown>): Logger;
}

function line(level: string, obj: Record<string, unknown>, msg?: string): void {
  const record: Record<string, unknown> = { level, time: new Date().toISOString(), msg, ...obj };
  if (record.err instanceof Error)
    record.err = { message: record.err.message, code: (record.err as { code?: unknown }).code };
  process.stderr.write(`${JSON.stringify(record)}\n`);
}

export const defaultLogger: Logger = {
  debug() {},
  info() {},
  warn: (obj, msg) => line("warn", obj, msg),
  error: (obj, msg) => line("error", obj, msg),
};

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export function childLogger(logger: Logger, bindings: Record<string, unknown>): Logger {
  if (logger.child) return logger.child(bindings);
  return {
    debug: (o, m) => logger.debug({ ...bindings, ...o }, m),
    info: (o, m) => logger.info({ ...bindings, ...o }, m),
    warn: (o, m) => logger.warn({ ...bindings, ...o }, m),
    error: (o, m) => logger.error({ ...bindings, ...o }, m),
  };
}
