import { apiRoute } from "@/lib/http/api-route";
import { deleteSample } from "@/lib/services/sample-deletion";

export const dynamic = "force-dynamic";

// Deletes one sample of the caller's team: its URL answers 404 from then on.
export const DELETE = apiRoute({}, async ({ handle, principal, params }) => ({
  deleted: await deleteSample(handle.db, { teamId: principal.team.id, id: params.id! }),
}));
