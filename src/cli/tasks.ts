/**
 * Loads a tasks module for `skipq worker --tasks`: a file whose default export
 * maps job kinds to handlers `(payload, ctx) => Promise`. `.js`/`.mjs`/`.cjs`
 * load with Node; `.ts`/`.mts`/`.cts` load when Node already understands
 * TypeScript (e.g. `node --import tsx`) or when `tsx` is installed, which is
 * then registered for this process. Invariant: a missing file, a failed import
 * or an export without handlers is a `CliError` before any database work.
 */
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { NAME_PATTERN } from "../core/validate.js";
import type { Handler } from "../worker/worker.js";
import { CliError } from "./errors.js";

const SHAPE =
  'its default export must map job kinds to handler functions, e.g. export default { "send-email": async (payload, ctx) => { … } }';

const TS_EXTENSIONS = new Set([".ts", ".mts", ".cts"]);

/** Resolves, imports and checks a tasks module: its handlers by kind, and its optional named export `cron` (checked by cli/cron.ts). */
export async function loadTasksModule(file: string): Promise<{ handlers: Map<string, Handler>; cron: unknown }> {
  const resolved = path.resolve(file);
  if (!existsSync(resolved) || !statSync(resolved).isFile()) {
    throw new CliError(
      `tasks module ${JSON.stringify(file)} does not exist (looked at ${resolved}): pass the path to a .js, .mjs or .ts file; ${SHAPE}`,
    );
  }
  const module = await importModule(resolved);
  let exported = (module as { default?: unknown }).default;
  // A CommonJS module imported from ESM puts module.exports on default; `exports.default` nests once more.
  if (exported && typeof exported === "object" && "default" in exported && !isHandlerMap(exported)) {
    exported = (exported as { default: unknown }).default;
  }
  if (exported === null || typeof exported !== "object" || Array.isArray(exported)) {
    throw new CliError(`tasks module ${file} has no handlers: ${SHAPE}`);
  }
  const handlers = new Map<string, Handler>();
  for (const [kind, handler] of Object.entries(exported)) {
    if (typeof handler !== "function") {
      throw new CliError(`tasks module ${file}: the handler for ${JSON.stringify(kind)} is not a function; ${SHAPE}`);
    }
    if (!NAME_PATTERN.test(kind)) {
      throw new CliError(
        `tasks module ${file}: ${JSON.stringify(kind)} is not a valid job kind (use letters, digits, "_", ".", ":" or "-")`,
      );
    }
    handlers.set(kind, handler as Handler);
  }
  if (handlers.size === 0) throw new CliError(`tasks module ${file} has no handlers: ${SHAPE}`);
  return { handlers, cron: (module as { cron?: unknown }).cron };
}

function isHandlerMap(value: object): boolean {
  const values = Object.values(value);
  return values.length > 0 && values.every((v) => typeof v === "function");
}

async function importModule(resolved: string): Promise<unknown> {
  const url = pathToFileURL(resolved).href;
  try {
    return await import(url);
  } catch (error) {
    if (TS_EXTENSIONS.has(path.extname(resolved)) && isUnknownExtension(error)) {
      await registerTypeScript(resolved);
      try {
        return await import(`${url}?ts`);
      } catch (retry) {
        throw importFailed(resolved, retry);
      }
    }
    throw importFailed(resolved, error);
  }
}

function isUnknownExtension(error: unknown): boolean {
  return (error as { code?: string })?.code === "ERR_UNKNOWN_FILE_EXTENSION";
}

async function registerTypeScript(resolved: string): Promise<void> {
  try {
    const tsx = (await import("tsx/esm/api")) as { register: () => unknown };
    tsx.register();
  } catch {
    throw new CliError(
      `cannot load the TypeScript tasks module ${resolved}: install tsx (npm i -D tsx) or start with \`node --import tsx\`, or compile it to .js`,
    );
  }
}

function importFailed(resolved: string, error: unknown): CliError {
  const reason = error instanceof Error ? (error.message.split("\n")[0] ?? error.message) : String(error);
  return new CliError(`tasks module ${resolved} failed to load: ${reason}`);
}
