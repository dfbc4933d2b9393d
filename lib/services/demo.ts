import { existsSync } from "node:fs";
import { sql } from "drizzle-orm";
import type { Db, DbOrTx } from "../db/client";
import { teams } from "../db/schema";
import { randomToken } from "../ids";
import { createApiKey } from "./api-keys";
import { createDeployment } from "./deployments";
import { createTeam } from "./teams";
import { insertUser, prepareUser, type PreparedUser } from "./users";

export type DemoCredentials = {
  teamSlug: string;
  email: string;
  password: string;
  apiKey: string;
  modelKey: string;
  /** The demo deployment's name, when a demo model was given. */
  deploymentName: string | null;
};

/** The demo user's credentials, hashed ahead (the launcher starts this while the database boots). */
export type DemoUser = { email: string; password: string; prepared: PreparedUser };

export async function prepareDemoUser(): Promise<DemoUser> {
  const email = "demo@example.com";
  const password = `demo-${randomToken(12)}`;
  return { email, password, prepared: await prepareUser({ email, password, name: "Demo user" }) };
}

/**
 * First run only (no team exists yet): a demo team, a demo user who owns it, an API key and
 * a model key, and with `demoModel` a deployment named `demo` serving it. Returns the
 * credentials (shown once), or null when the database already has teams.
 */
export async function seedDemo(
  db: Db,
  options: { demoModel?: string; demoUser?: Promise<DemoUser> } = {},
): Promise<DemoCredentials | null> {
  const teamCount = async (tx: DbOrTx) => (await tx.select({ n: sql<number>`count(*)::int` }).from(teams))[0]?.n ?? 0;
  if ((await teamCount(db)) > 0) return null; // not a first run: no password to hash
  const demo = await (options.demoUser ?? prepareDemoUser());
  return db.transaction(async (tx) => {
    // Serialise concurrent first starts on the same database.
    await tx.execute(sql`select pg_advisory_xact_lock(4242001)`);
    if ((await teamCount(tx)) > 0) return null;
    const team = await createTeam(tx, { slug: "demo", name: "Demo team" });
    await insertUser(tx, demo.prepared, { teamId: team.id, role: "owner" });
    const api = await createApiKey(tx, { teamId: team.id, kind: "api", name: "demo API key" });
    const model = await createApiKey(tx, { teamId: team.id, kind: "model", name: "demo model key" });
    const deployment = options.demoModel
      ? await createDeployment(tx, { teamId: team.id, name: "demo", model: options.demoModel })
      : null;
    return {
      teamSlug: team.slug,
      email: demo.email,
      password: demo.password,
      apiKey: api.secret,
      modelKey: model.secret,
      deploymentName: deployment?.name ?? null,
    };
  });
}

/**
 * The demo deployment (team `demo`, deployment `demo`) still naming the tiny model where an
 * earlier DATA_DIR kept it, now gone (the folder moved, `DATA_DIR` set to the new place), is
 * pointed at `demoModel`: before, it failed with not_found for good while the launcher generated
 * the model anew in the new place. A deployment an operator pointed elsewhere is left alone.
 */
export async function repointDemoModel(db: DbOrTx, demoModel: string): Promise<boolean> {
  const [row] = await db.execute<{ id: string; model: string }>(sql`
    select d.id, d.model from deployments d join teams t on t.id = d.team_id
    where t.slug = 'demo' and d.name = 'demo' and d.upstream_kind is null`);
  if (!row || row.model === demoModel || !/[\\/]models[\\/]tiny$/.test(row.model) || existsSync(row.model))
    return false;
  await db.execute(sql`update deployments set model = ${demoModel} where id = ${row.id}`);
  return true;
}
