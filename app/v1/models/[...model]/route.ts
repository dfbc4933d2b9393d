import { apiRoute } from "@/lib/http/api-route";
import { retrieveModel } from "@/lib/services/openai-models";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// OpenAI's model object of one of the caller's deployments: /v1/models/team/name (the id's `/`
// as a path separator or encoded as %2F), or /v1/models/name. Another team's: 404.
export const GET = apiRoute({}, async ({ handle, principal, params }) =>
  retrieveModel(handle.db, principal.team, params.model ?? ""),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
