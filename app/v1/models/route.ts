import { apiRoute } from "@/lib/http/api-route";
import { listModels } from "@/lib/services/openai-models";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// OpenAI's model list: the caller's team's deployments, as the `model` the completion paths take.
export const GET = apiRoute({}, async ({ handle, principal }) => listModels(handle.db, principal.team));

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
