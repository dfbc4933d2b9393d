import path from "node:path";
import { CreateDeploymentBody } from "@/lib/contracts/deployments";
import { isHubId } from "@/lib/contracts/models";
import { env } from "@/lib/env";
import { invalidRequest } from "@/lib/errors";
import { sessionRoute } from "@/lib/http/session-route";
import { teamLimits } from "@/lib/limits";
import { refusedUpstream } from "@/lib/net/upstream-hosts";
import {
  assertModelDeploymentQuota,
  createDeployment,
  listDeploymentDtos,
  toDeploymentDto,
} from "@/lib/services/deployments";
import { deploymentStates } from "@/lib/services/deployment-state";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The team's deployments with their states (the page polls it while one downloads or loads).
export const GET = sessionRoute({}, async ({ handle, session }) => listDeploymentDtos(handle.db, session.team));

// Owners create deployments: a model (a hub id, or a folder under MODEL_FOLDERS) in a dtype, or
// upstream servers (not on this machine or link-local, unless UPSTREAM_ALLOWED_HOSTS lists them).
export const POST = sessionRoute(
  { body: CreateDeploymentBody, role: "owner", action: "create deployments" },
  async ({ handle, session, body }) => {
    if (body.model !== undefined) {
      assertTeamModel(body.model, env().MODEL_FOLDERS);
      await assertModelDeploymentQuota(handle.db, session.team.id, teamLimits(session.team).modelDeployments);
    }
    for (const [i, url] of (body.upstream?.urls ?? []).entries()) {
      const why = await refusedUpstream(url, env().UPSTREAM_ALLOWED_HOSTS);
      if (why) throw invalidRequest(`Invalid 'upstream.urls[${i}]': ${why}.`, `upstream.urls[${i}]`);
    }
    // Checked again at every connection: the name may resolve elsewhere later (DNS rebinding).
    const d = await createDeployment(handle.db, { teamId: session.team.id, ...body, checkUpstreamHosts: true });
    const [status] = await deploymentStates(handle.db, [d]);
    return Response.json(toDeploymentDto(d, session.team.slug, status!), { status: 201 });
  },
);

/**
 * What a team's owner may deploy: a hub id, or a folder inside one of the operator's
 * MODEL_FOLDERS. Any other path names a folder on the workers' machines (another team's model,
 * or anything else there): the operator deploys those with the CLI.
 */
function assertTeamModel(model: string, folders: readonly string[]): void {
  if (isHubId(model)) return;
  if (path.isAbsolute(model)) {
    const p = path.resolve(model);
    if (folders.some((f) => p === f || p.startsWith(f.endsWith(path.sep) ? f : f + path.sep))) return;
  }
  throw invalidRequest(
    `Invalid 'model': must be a hub id (org/name, optionally @revision)` +
      (folders.length > 0 ? ` or a folder inside ${folders.join(", ")}` : "") +
      "; other model folders are deployed by the operator (npm run cli -- deployment:create).",
    "model",
  );
}

export const { PUT, PATCH, DELETE } = otherMethods("GET", "POST");
