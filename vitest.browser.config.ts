import { defineConfig } from "vitest/config";

// The browser suite: Playwright driving the system's Chromium against a real
// dashboard, worker and PostgreSQL. Run by `npm run test:browser`.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.e2e.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
