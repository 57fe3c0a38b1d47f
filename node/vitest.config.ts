import { defineConfig } from "vitest/config";

// The tests open stores, spawn the `factlog` command and served stores: give them time on a
// shared two-core machine, and run files in forked processes (a store is held per process).
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
