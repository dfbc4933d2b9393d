import { defineConfig } from "vitest/config";
import path from "node:path";

// Three projects:
// - unit: pure modules (lib/, workers/), no server.
// - embedded / postgres: integration tests over real HTTP against the built app,
//   one project per database. The postgres project runs only when TEST_DATABASE_URL is set.
const alias = { "@": path.resolve(import.meta.dirname) };
const integration = (name: "embedded" | "postgres") => ({
  resolve: { alias },
  test: {
    name,
    include: ["tests/integration/**/*.test.ts"],
    globalSetup: ["tests/setup/global-setup.ts"],
    env: { TEST_DB: name },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});

export default defineConfig({
  test: {
    projects: [
      {
        resolve: { alias },
        test: {
          name: "unit",
          include: ["lib/**/*.test.ts", "workers/**/*.test.ts", "scripts/**/*.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      integration("embedded"),
      ...(process.env.TEST_DATABASE_URL ? [integration("postgres")] : []),
    ],
  },
});
