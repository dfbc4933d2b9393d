import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { connect } from "../lib/db/client";
import { memberships } from "../lib/db/schema";
import { migrateDatabase } from "../lib/db/migrate";
import { seedDemo } from "../lib/services/demo";
import { createTeam } from "../lib/services/teams";
import { authenticateUser } from "../lib/services/users";
import { ensureBuild } from "../scripts/lib/build";
import { startThrowawayDb } from "../lib/db/throwaway";
import { cachedTinyModel } from "../scripts/tiny-model/generate";
import { startApp, startWorker } from "../tests/setup/global-setup";
import { startHubServer } from "../workers/engine/testing/hub-server";

/**
 * A world of its own for the browser tests: a fresh embedded PostgreSQL, the built app (in
 * NEXT_DIST_DIR when set) and one worker, the same way the integration tests start them.
 * Tests create their own users and teams through the UI; the only seed is what `npm start`
 * creates on first run (the demo user and its `demo` deployment of the tiny model), plus a second team for that user (the team switcher).
 */
export default async function globalSetup() {
  ensureBuild();
  const db = await startThrowawayDb();
  await migrateDatabase(db.url);
  const tinyModel = await cachedTinyModel();
  const demo = await seedWorld(db.url, tinyModel);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-e2e-"));
  const common = {
    DATABASE_URL: db.url,
    AUTH_SECRET: "e2e-secret-0123456789-0123456789-abcdef",
    DATA_DIR: dataDir,
  };
  // Upstream servers on this machine are the operator's to allow: the upstream spec's fleet is
  // at 127.0.0.1.
  const app = await startApp({
    ...common,
    SIGNIN_ATTEMPTS_PER_ADDRESS: "100000",
    USAGE_FLUSH_MS: "200",
    UPSTREAM_ALLOWED_HOSTS: "127.0.0.1",
  });
  // A local stand-in for the model hub: the dashboard deploys `e2e/tiny` from it.
  const hub = await startHubServer({ repos: { "e2e/tiny": tinyModel } });
  const worker = await startWorker({
    ...common,
    WORKER_MODELS: tinyModel,
    WORKER_HEARTBEAT_SECONDS: "1",
    DATASET_POLL_MS: "200",
    HF_ENDPOINT: hub.url,
  });
  // Workers of the test runner start after this and read the URL from the environment.
  process.env.E2E_BASE_URL = app.url;
  process.env.E2E_DEMO_EMAIL = demo.email;
  process.env.E2E_DEMO_PASSWORD = demo.password;
  // For specs that need what the UI cannot make (a deployment of a new user's team).
  process.env.E2E_DATABASE_URL = db.url;
  process.env.E2E_TINY_MODEL = tinyModel;
  return async () => {
    for (const child of [worker.child, app.child]) {
      if (child.exitCode !== null) continue;
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
    if (process.env.E2E_APP_LOGS) console.log(app.logs.join(""), worker.logs.join(""));
    await hub.close();
    await db.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

async function seedWorld(url: string, demoModel: string) {
  const handle = connect(url, { max: 1 });
  try {
    const demo = await seedDemo(handle.db, { demoModel });
    if (!demo) throw new Error("the e2e database is not fresh");
    const user = await authenticateUser(handle.db, demo.email, demo.password);
    const research = await createTeam(handle.db, { slug: "research", name: "Research lab" });
    await handle.db.insert(memberships).values({ userId: user!.id, teamId: research.id, role: "member" });
    return demo;
  } finally {
    await handle.close();
  }
}
