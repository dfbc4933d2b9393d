// POST /v1/pipelines/:id/add-batch (rewritten here by next.config.mjs): up to 1,000 add bodies,
// one result each. A Pages Router API route, like add (lib/http/node-api-route.ts).
import { AddBatchEnvelope } from "@/lib/contracts/batch";
import { env } from "@/lib/env";
import { nodeApiRoute } from "@/lib/http/node-api-route";
import { addBatch } from "@/lib/services/batch-add";
import { getPipeline } from "@/lib/services/pipelines";

export const config = { api: { bodyParser: false } };

export default nodeApiRoute(
  {
    method: "POST",
    params: ["id"],
    body: AddBatchEnvelope,
    maxBodyBytes: () => env().ADD_BATCH_MAX_BODY_BYTES,
    idempotent: true,
  },
  async ({ handle, principal, params, body, requestId }) => {
    const pipeline = await getPipeline(handle.db, { teamId: principal.team.id, id: params.id! });
    const results = await addBatch(handle.db, {
      teamId: principal.team.id,
      pipelineId: pipeline.id,
      items: body.samples,
      maxItemBytes: env().MAX_BODY_BYTES,
      requestId,
    });
    return { results };
  },
);
