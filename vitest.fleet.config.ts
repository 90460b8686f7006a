// The fleet suite (test/fleet): worker processes on "hosts" that are Linux network namespaces, their
// links cut or their packets dropped, PgBouncer in front of PostgreSQL. Needs root and iproute2; each
// file owns its PostgreSQL server and namespaces. Figures go to test/chaos/results.json with the chaos
// rows (rows F*, see test/chaos/global-setup.ts).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/fleet/**/*.fleet.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    // One file at a time: each runs many worker processes on a 2-core machine, and measures timing.
    maxWorkers: 1,
    fileParallelism: false,
    globalSetup: ["test/chaos/global-setup.ts"],
  },
});
