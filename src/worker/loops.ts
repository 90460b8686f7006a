/**
 * The background loops a worker runs beside claiming, built from its options:
 * the maintainer (leader election, reaper, retention, an optional scheduler)
 * and presence. Construction only; the worker starts and stops them.
 */
import type { Logger } from "../core/logger.js";
import type { Store } from "../db/store.js";
import { Maintainer, type MaintainerOptions } from "../maintenance/maintainer.js";
import { Presence, type PresenceOptions } from "./presence.js";
import type { WorkerSettings } from "./settings.js";
import type { WorkerOptions } from "./types.js";

interface LoopParts {
  options: WorkerOptions;
  settings: WorkerSettings;
  store: Store;
  logger: Logger;
}

/** The maintainer, unless `maintenance: false`. */
export function workerMaintainer(
  { options, settings: s, store, logger }: LoopParts,
  onReaped: MaintainerOptions["onReaped"],
): Maintainer | undefined {
  const maintenance = options.maintenance ?? true;
  if (maintenance === false) return undefined;
  const maintainer = new Maintainer({
    ...(maintenance === true ? {} : maintenance),
    reaperInterval: (maintenance === true ? undefined : maintenance.reaperInterval) ?? options.reaperInterval ?? "5s",
    store,
    holder: s.id,
    jobLeaseMs: s.lockTimeoutMs,
    logger,
    onReaped,
  });
  if (options.scheduler) maintainer.add(options.scheduler);
  return maintainer;
}

/** Presence, unless `presence: false`. */
export function workerPresence(
  { options, settings: s, store, logger }: LoopParts,
  kinds: PresenceOptions["kinds"],
): Presence | undefined {
  if (!(options.presence ?? true)) return undefined;
  return new Presence({ store, workerId: s.id, queues: s.queues, kinds, intervalMs: s.presenceMs, logger });
}
