/**
 * Bulk cancel and bulk delete where they meet workflows and waiters: every job
 * a bulk action takes out of the live table resolves its dependents (by each
 * child's onParentFailure), waiting jobs can be selected, and a waiter on any
 * job involved settles — a cancelled job as cancelled, a deleted one with
 * SKIPQ_NOT_FOUND (also with completed history off, where "gone" is ambiguous).
 * Through Admin.bulk and the dashboard's bulk route.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Admin, type RunningDashboard, Skipq, silentLogger, startDashboard } from "../../src/index.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

// A poll far longer than any test: a wait that settles did so by notification.
const t = useTestQueue("bulk dependents", { waitPollInterval: "10m" });
let admin: Admin;
beforeAll(async () => {
  admin = new Admin(t.skipq);
});

const status = async (id: string) => (await admin.getJob(id))?.status;

/** A parent nobody runs (scheduled an hour out) and one child under each policy, all in `queue`. */
async function family(queue: string) {
  const { id: parent } = await t.skipq.enqueue("p", {}, { queue, delay: "1h" });
  const child = async (policy: "cancel" | "run" | "wait") =>
    (await t.skipq.enqueue("c", { policy }, { queue, dependsOn: [parent], onParentFailure: policy })).id;
  return { parent, cancel: await child("cancel"), run: await child("run"), wait: await child("wait") };
}

async function marked(id: string): Promise<void> {
  await until(`job ${id} marked as waited for`, async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    return rows[0]?.notify_on_finish === true;
  });
}

describe("bulk cancel", () => {
  test("resolves the dependents of the jobs it cancels, by each child's policy", async () => {
    const f = await family("bc1");
    expect(await admin.bulk("cancel", { ids: [f.parent] })).toBe(1);
    expect(await status(f.parent)).toBe("cancelled");
    const cancelled = await admin.getJob(f.cancel);
    expect(cancelled?.status).toBe("cancelled");
    expect(cancelled?.last_error).toBe(`cancelled because parent job ${f.parent} was cancelled`);
    expect(await status(f.run)).toBe("pending");
    // "wait": until the parent is retried by hand and completes (the parent is in history, so it can be).
    expect(await status(f.wait)).toBe("waiting");
  });

  test("selects waiting jobs (counted and cancelled), and their own dependents follow", async () => {
    const { id: parent } = await t.skipq.enqueue("p", {}, { queue: "bc2", delay: "1h" });
    const { id: child } = await t.skipq.enqueue("c", {}, { queue: "bc2", dependsOn: [parent] });
    const { id: grand } = await t.skipq.enqueue("c", {}, { queue: "bc2b", dependsOn: [child] });
    expect((await admin.bulkCounts({ queue: "bc2", status: "waiting" })).applicable.cancel).toBe(1);
    expect(await admin.bulk("cancel", { queue: "bc2", status: "waiting" })).toBe(1);
    expect(await status(child)).toBe("cancelled");
    expect((await admin.getJob(grand))?.last_error).toBe(`cancelled because parent job ${child} was cancelled`);
    expect(await status(parent)).toBe("pending");
  });

  test("settles the waiters of a dependent it cancels, and of the jobs it cancels", async () => {
    const f = await family("bc3");
    const onChild = t.skipq.waitFor(f.cancel, { timeout: "20s" });
    const onParent = t.skipq.waitFor(f.parent, { timeout: "20s" });
    await Promise.all([marked(f.cancel), marked(f.parent)]);
    await admin.bulk("cancel", { queue: "bc3", status: "pending" });
    expect(await onParent).toMatchObject({ status: "cancelled" });
    expect(await onChild).toMatchObject({
      status: "cancelled",
      error: `cancelled because parent job ${f.parent} was cancelled`,
    });
  });
});

describe("bulk delete", () => {
  test("treats a deleted parent as cancelled: cancel → cancelled, run → runs, wait → cancelled (no retry can come)", async () => {
    const f = await family("bd1");
    expect(await admin.bulk("delete", { ids: [f.parent] })).toBe(1);
    expect(await admin.getJob(f.parent)).toBeUndefined();
    const cancelled = await admin.getJob(f.cancel);
    expect(cancelled?.status).toBe("cancelled");
    expect(cancelled?.last_error).toBe(`cancelled because parent job ${f.parent} was deleted`);
    expect(await status(f.run)).toBe("pending");
    const waited = await admin.getJob(f.wait);
    expect(waited?.status).toBe("cancelled");
    expect(waited?.last_error).toBe(`cancelled because parent job ${f.parent} was deleted`);
    // Nothing is left waiting on the deleted parent.
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE status = 'waiting' AND queue = 'bd1'`,
    );
    expect(rows[0].n).toBe(0);
  });

  test("deletes waiting jobs too (as its count says), their dependents following", async () => {
    const { id: parent } = await t.skipq.enqueue("p", {}, { queue: "bd2", delay: "1h" });
    const { id: child } = await t.skipq.enqueue("c", {}, { queue: "bd2", dependsOn: [parent] });
    const { id: grand } = await t.skipq.enqueue("c", {}, { queue: "bd2b", dependsOn: [child], onParentFailure: "run" });
    const counts = await admin.bulkCounts({ queue: "bd2" });
    expect(counts.applicable.delete).toBe(2);
    expect(await admin.bulk("delete", { queue: "bd2" })).toBe(2);
    expect(await admin.getJob(child)).toBeUndefined();
    expect(await admin.getJob(parent)).toBeUndefined();
    expect(await status(grand)).toBe("pending");
  });

  test("a parent and its child deleted together leave no trace of either, and the grandchild follows", async () => {
    const { id: parent } = await t.skipq.enqueue("p", {}, { queue: "bd3", delay: "1h" });
    const { id: child } = await t.skipq.enqueue("c", {}, { queue: "bd3", dependsOn: [parent] });
    const { id: grand } = await t.skipq.enqueue("c", {}, { queue: "bd3b", dependsOn: [child] });
    expect(await admin.bulk("delete", { queue: "bd3" })).toBe(2);
    expect(await admin.getJob(parent)).toBeUndefined();
    expect(await admin.getJob(child)).toBeUndefined();
    const g = await admin.getJob(grand);
    expect(g?.status).toBe("cancelled");
    expect(g?.last_error).toBe(`cancelled because parent job ${child} was deleted`);
  });

  test.each([true, false])(
    "a waiter on a deleted job rejects with SKIPQ_NOT_FOUND (completed history kept: %s)",
    async (keep) => {
      await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = $1`, [keep]);
      try {
        const f = await family(`bd4${keep}`);
        const onParent = t.skipq.waitFor(f.parent, { timeout: "20s" }).catch((e: unknown) => e);
        const onChild = t.skipq.waitFor(f.cancel, { timeout: "20s" });
        await Promise.all([marked(f.parent), marked(f.cancel)]);
        await admin.bulk("delete", { ids: [f.parent] });
        expect(await onParent).toMatchObject({ code: "SKIPQ_NOT_FOUND", message: expect.stringMatching(/deleted/) });
        expect(await onChild).toMatchObject({ status: "cancelled" });
      } finally {
        await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = true`);
      }
    },
  );
});

describe("where bulk actions meet other features", () => {
  test("bulk cancel of a running job aborts its handler and settles its waiter as cancelled", async () => {
    let aborted = false;
    const w = t.skipq.worker({ queues: ["bc-run"], pollInterval: 50 }).register("hold", async (_p, ctx) => {
      await new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => {
          aborted = true;
          resolve();
        }),
      );
    });
    await w.start();
    try {
      await until("the worker listens", () => w.listener?.connected);
      const { id } = await t.skipq.enqueue("hold", {}, { queue: "bc-run" });
      const waiting = t.skipq.waitFor(id, { timeout: "20s" });
      await until("running", async () => (await status(id)) === "running");
      await marked(id);
      expect(await admin.bulk("cancel", { queue: "bc-run" })).toBe(1);
      expect(await waiting).toMatchObject({ status: "cancelled" });
      await until("the handler's signal aborted", () => aborted);
    } finally {
      await w.stop();
    }
  });

  test("bulk delete frees idempotency keys and live uniqueness windows, as any exit from the live table", async () => {
    const keyed = await t.skipq.enqueue("k", {}, { queue: "bd-keys", idempotencyKey: "key-1", delay: "1h" });
    const unique = await t.skipq.enqueue("u", {}, { queue: "bd-keys", unique: { period: "1h", states: "live" } });
    expect(await admin.bulk("delete", { queue: "bd-keys" })).toBe(2);
    const again = await t.skipq.enqueue("u", {}, { queue: "bd-keys", unique: { period: "1h", states: "live" } });
    expect(again.created).toBe(true);
    expect(again.id).not.toBe(unique.id);
    // The key starts its retention: the same key still returns the deleted job's id until it expires.
    expect((await t.skipq.enqueue("k", {}, { queue: "bd-keys", idempotencyKey: "key-1" })).id).toBe(keyed.id);
  });

  test("a role with the documented dashboard grants (DML, no DDL) can bulk cancel and delete, dependents resolved", async () => {
    const role = `bulk_${t.schema}`.slice(0, 60);
    await t.db.query(`DROP ROLE IF EXISTS ${role}`);
    await t.db.query(`CREATE ROLE ${role} LOGIN`);
    const schema = `"${t.schema}"`;
    await t.db.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
    await t.db.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
    await t.db.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${schema} TO ${role}`);
    const url = new URL(DATABASE_URL);
    url.username = role;
    const limited = new Skipq({ connectionString: url.toString(), schema: t.schema, logger: silentLogger });
    try {
      const a = await family("role1");
      const b = await family("role2");
      const asRole = new Admin(limited);
      expect(await asRole.bulk("cancel", { ids: [a.parent] })).toBe(1);
      expect(await asRole.bulk("delete", { ids: [b.parent] })).toBe(1);
      expect([await status(a.cancel), await status(a.run), await status(a.wait)]).toEqual([
        "cancelled",
        "pending",
        "waiting",
      ]);
      expect([await status(b.cancel), await status(b.run), await status(b.wait)]).toEqual([
        "cancelled",
        "pending",
        "cancelled",
      ]);
    } finally {
      await limited.close();
      await t.db.query(`DROP OWNED BY ${role}`);
      await t.db.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });
});

describe("the dashboard's bulk route", () => {
  const TOKEN = "bulk-dependents-token-0123456789";
  let d: RunningDashboard;
  let cookie = "";
  let csrf = "";
  const post = (path: string, form: Record<string, string | string[]>) => {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
    return fetch(new URL(path, d.url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: body.toString(),
      redirect: "manual",
    });
  };
  beforeAll(async () => {
    d = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {} });
    const res = await post("login", { token: TOKEN, next: "/" });
    cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
    const page = await (await fetch(new URL("jobs", d.url), { headers: { cookie } })).text();
    csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] as string;
  });
  afterAll(async () => {
    await d.close();
  });

  test("cancels waiting jobs of a filter and deletes parents, resolving dependents either way", async () => {
    const a = await family("dash1");
    const b = await family("dash2");
    const cancel = await post("jobs/bulk", {
      _csrf: csrf,
      action: "cancel",
      scope: "filter",
      queue: "dash1",
      status: "waiting",
      confirm: "3",
    });
    expect(cancel.status).toBe(303);
    for (const id of [a.cancel, a.run, a.wait]) expect(await status(id)).toBe("cancelled");
    const del = await post("jobs/bulk", {
      _csrf: csrf,
      action: "delete",
      scope: "selected",
      ids: [b.parent],
      confirm: "1",
    });
    expect(del.status).toBe(303);
    expect(await status(b.cancel)).toBe("cancelled");
    expect(await status(b.run)).toBe("pending");
    expect(await status(b.wait)).toBe("cancelled");
  });
});
