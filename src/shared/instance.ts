/**
 * Small helpers shared by the worker and the outbox relay: how a process
 * names itself in locked_by, and which fenced outcomes the database refused.
 */
import os from "node:os";

/** host:pid:random — unique per process and instance, readable in locked_by and the workers table. */
export function instanceId(): string {
  return `${os.hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
}

/** The ids in `sent` missing from `accepted`: outcomes refused because their lease had moved on. */
export function refused(sent: readonly string[], accepted: readonly string[]): string[] {
  if (accepted.length === sent.length) return [];
  const kept = new Set(accepted);
  return sent.filter((id) => !kept.has(id));
}
