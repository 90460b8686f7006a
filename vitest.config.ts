import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The chaos and fleet suites have their own configs (npm run test:chaos, npm run test:fleet).
    exclude: ["test/chaos/**", "test/fleet/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two files at a time even on two cores (vitest's default there is one): most tests wait on
    // PostgreSQL and timers, not the CPU. 298 s → 218 s for the suite on this 2-core machine.
    maxWorkers: 2,
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
  },
});
