import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { teams } from "../db/schema";
import { randomToken } from "../ids";
import { createApiKey } from "./api-keys";
import { createDeployment } from "./deployments";
import { createTeam } from "./teams";
import { createUser } from "./users";

export type DemoCredentials = {
  teamSlug: string;
  email: string;
  password: string;
  apiKey: string;
  modelKey: string;
  /** The demo deployment's name, when a demo model was given. */
  deploymentName: string | null;
};

/**
 * First run only (no team exists yet): a demo team, a demo user who owns it, an API key and
 * a model key, and with `demoModel` a deployment named `demo` serving it. Returns the
 * credentials (shown once), or null when the database already has teams.
 */
export async function seedDemo(db: Db, options: { demoModel?: string } = {}): Promise<DemoCredentials | null> {
  return db.transaction(async (tx) => {
    // Serialise concurrent first starts on the same database.
    await tx.execute(sql`select pg_advisory_xact_lock(4242001)`);
    const [{ n } = { n: 0 }] = await tx.select({ n: sql<number>`count(*)::int` }).from(teams);
    if (n > 0) return null;
    const team = await createTeam(tx, { slug: "demo", name: "Demo team" });
    const email = "demo@example.com";
    const password = `demo-${randomToken(12)}`;
    await createUser(tx, { email, password, name: "Demo user", teamId: team.id, role: "owner" });
    const api = await createApiKey(tx, { teamId: team.id, kind: "api", name: "demo API key" });
    const model = await createApiKey(tx, { teamId: team.id, kind: "model", name: "demo model key" });
    const deployment = options.demoModel
      ? await createDeployment(tx, { teamId: team.id, name: "demo", model: options.demoModel })
      : null;
    return {
      teamSlug: team.slug,
      email,
      password,
      apiKey: api.secret,
      modelKey: model.secret,
      deploymentName: deployment?.name ?? null,
    };
  });
}
