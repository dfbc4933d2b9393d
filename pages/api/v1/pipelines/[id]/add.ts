// POST /v1/pipelines/:id/add (rewritten here by next.config.mjs): a Pages Router API route, like
// every high-volume ingest route, for the reason given in lib/http/node-api-route.ts.
import { AddSampleBody } from "@/lib/contracts/pipelines";
import { nodeApiRoute } from "@/lib/http/node-api-route";
import { addSample } from "@/lib/services/samples";

// Next's body parser is off: nodeApiRoute reads the body itself, with the API's limit and errors.
export const config = { api: { bodyParser: false } };

export default nodeApiRoute(
  { method: "POST", params: ["id"], body: AddSampleBody, idempotent: true },
  async ({ handle, principal, params, body }) =>
    addSample(handle.db, { teamId: principal.team.id, pipelineId: params.id!, sample: body }),
);
