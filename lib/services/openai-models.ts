// GET /v1/models and /v1/models/{model}: a team's deployments as OpenAI model objects, by the
// name the completion paths take as `model`.
import type { ModelList, ModelObject } from "../contracts/openai";
import type { DbOrTx } from "../db/client";
import { storableParams } from "../http/route-parts";
import type { Deployment, Team } from "../db/schema";
import { resolveChatModel } from "./chat-completions";
import { listDeployments } from "./deployments";

const modelObject = (team: Pick<Team, "slug">, d: Pick<Deployment, "name" | "createdAt">): ModelObject => ({
  id: `${team.slug}/${d.name}`,
  object: "model",
  created: Math.floor(d.createdAt.getTime() / 1000),
  owned_by: team.slug,
});

/** GET /v1/models: the team's deployments, by the name `model` takes. Never another team's. */
export async function listModels(db: DbOrTx, team: Pick<Team, "id" | "slug">): Promise<ModelList> {
  const rows = await listDeployments(db, team.id);
  return { object: "list", data: rows.map((d) => modelObject(team, d)) };
}

/** GET /v1/models/{model}: one of them, named as `model` is; unknown or another team's: 404. */
export async function retrieveModel(db: DbOrTx, team: Team, model: string): Promise<ModelObject> {
  let id = model;
  try {
    id = decodeURIComponent(model);
  } catch {
    // not encoded: looked up as it is
  }
  storableParams({ model: id }); // decoded once more: %2500 is a NUL now, a 400 as in any path
  return modelObject(team, (await resolveChatModel(db, team, id)).deployment);
}
