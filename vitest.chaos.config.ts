// The chaos suite (test/chaos): real process kills, PostgreSQL restarts and
// hostile input. Each file owns its PostgreSQL server; figures go to
// test/chaos/results.json (see test/chaos/global-setup.ts).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/chaos/**/*.chaos.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two files at a time: the machine is small and several tests measure timing.
    maxWorkers: 2,
    globalSetup: ["test/chaos/global-setup.ts"],
  },
});
