/**
 * routeNotification (src/worker/notifications.ts) without PostgreSQL: each
 * message on the schema's channel reaches its one part, and a queue this
 * worker does not serve wakes nothing.
 */
import { expect, test } from "vitest";
import type { Wakeup } from "../../src/shared/wakeup.js";
import { listenerConnected, type NotificationTargets, routeNotification } from "../../src/worker/notifications.js";

function targets() {
  const said: string[] = [];
  let refreshed: () => void = () => undefined;
  const t: NotificationTargets = {
    queues: ["mail", "sms"],
    fetcher: {
      notified: () => said.push("notified"),
      reachableAgain: () => said.push("reachable"),
      wakeup: { wake: () => said.push("woken") } as unknown as Wakeup,
    },
    claimer: {
      floors: {
        sweep: (queue: string) => said.push(`sweep ${queue}`),
        sweepAll: () => said.push("sweep all"),
      } as unknown as NotificationTargets["claimer"]["floors"],
      refresh: () =>
        new Promise<void>((resolve) => {
          said.push("refresh");
          refreshed = resolve;
        }),
    },
    leases: {
      cancelHint: async (id: string) => {
        said.push(`cancel ${id}`);
      },
    },
    onWarning: (error) => said.push(`warning ${String(error)}`),
  };
  return { t, said, refresh: () => refreshed() };
}

test("a queue name this worker serves wakes the fetcher; another queue's wakes nothing", () => {
  const { t, said } = targets();
  routeNotification(t, "mail");
  routeNotification(t, "billing");
  expect(said).toEqual(["notified"]);
});

test("!ready sweeps that queue's floor and wakes the fetcher, only for a queue it serves", () => {
  const { t, said } = targets();
  routeNotification(t, "!ready:sms");
  routeNotification(t, "!ready:billing");
  expect(said).toEqual(["sweep sms", "notified"]);
});

test("!flow sweeps every floor and re-reads the limits, then wakes the fetcher", async () => {
  const { t, said, refresh } = targets();
  routeNotification(t, "!flow");
  expect(said).toEqual(["sweep all", "refresh"]);
  refresh();
  await new Promise((resolve) => setImmediate(resolve));
  expect(said).toEqual(["sweep all", "refresh", "woken"]);
});

test("!cancel goes to leases as a hint with the job's id; the listener's reconnect claims now", () => {
  const { t, said } = targets();
  routeNotification(t, "!cancel:42");
  listenerConnected(t);
  expect(said).toEqual(["cancel 42", "reachable", "notified"]);
});
