import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The chaos and fleet suites have their own configs (npm run test:chaos, npm run test:fleet).
    exclude: ["test/chaos/**", "test/fleet/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
  },
});
