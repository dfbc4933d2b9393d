import { PatchSampleBody } from "@/lib/contracts/capture";
import { apiRoute } from "@/lib/http/api-route";
import { deleteSample } from "@/lib/services/sample-deletion";
import { mergeSampleMetadata } from "@/lib/services/samples";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Deletes one sample of the caller's team: its URL answers 404 from then on.
export const DELETE = apiRoute({}, async ({ handle, principal, params }) => ({
  deleted: await deleteSample(handle.db, { teamId: principal.team.id, id: params.id! }),
}));

// Feedback: merges labels into the sample's metadata (a captured completion rated afterwards).
export const PATCH = apiRoute({ body: PatchSampleBody }, async ({ handle, principal, params, body }) =>
  mergeSampleMetadata(handle.db, { teamId: principal.team.id, id: params.id!, metadata: body.metadata }),
);

export const { GET, POST, PUT } = otherMethods("PATCH", "DELETE");
