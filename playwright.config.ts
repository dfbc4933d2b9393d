import { defineConfig } from "@playwright/test";
import { chromiumLaunchOptions } from "./tests/helpers/chromium";

/**
 * Browser tests in Debian's Chromium (`npx playwright install` cannot download browsers here).
 * e2e/global-setup.ts starts a fresh embedded database, the built app and a worker on free
 * ports, and hands the app's URL to the tests through E2E_BASE_URL.
 */

export default defineConfig({
  testDir: "e2e",
  testMatch: "*.spec.ts",
  outputDir: "test-results/e2e",
  globalSetup: "./e2e/global-setup.ts",
  // Two cores shared with the app, the worker and the database: one browser at a time.
  workers: 1,
  fullyParallel: false,
  timeout: 90_000,
  expect: { timeout: 15_000 },
  reporter: [["list"]],
  use: {
    baseURL: process.env.E2E_BASE_URL,
    browserName: "chromium",
    viewport: { width: 1440, height: 900 },
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: chromiumLaunchOptions,
  },
});
