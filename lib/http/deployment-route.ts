// What a call of a deployment endpoint (/deployments/{team}/{name}) goes through before its body
// is read, kept apart from the wrapper that serves it (nodeDeploymentRoute, a Pages Router API
// route: see lib/http/node-deployment-route.ts).
import type { DbHandle } from "../db/client";
import type { Deployment, Team } from "../db/schema";
import { takeRequest } from "../limits";
import { authenticateKey, type KeyPrincipal } from "../services/api-keys";
import { keyMeter, type CompletionMeter } from "../services/completion-events";
import { authorizeDeployment, findDeploymentByPath } from "../services/deployments";

/**
 * The model key and the deployment (both usually from this process's cache), the key's right to
 * it, and the key's request limit (its headers, for every answer from here on; a refusal, 429,
 * carries them itself). The body only after this: an anonymous client cannot make the app read
 * 1 MiB.
 */
export async function admitDeploymentCall(
  handle: DbHandle,
  authorization: string | null | undefined,
  path: { teamSlug: string; name: string },
): Promise<{
  deployment: Deployment;
  team: Team;
  key: KeyPrincipal["key"];
  meter: CompletionMeter;
  limitHeaders: Record<string, string>;
}> {
  const [principal, found] = await Promise.all([
    authenticateKey(handle.db, authorization ?? null, "model"),
    findDeploymentByPath(handle.db, path),
  ]);
  const deployment = authorizeDeployment(principal, path, found);
  const meter = keyMeter(principal);
  return {
    limitHeaders: takeRequest(principal.key.id, meter.quota.limits),
    deployment,
    team: principal.team,
    key: principal.key,
    meter,
  };
}
