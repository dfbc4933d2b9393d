import { apiRoute } from "@/lib/http/api-route";
import { listModels } from "@/lib/services/openai-models";

export const dynamic = "force-dynamic";

// OpenAI's model list: the caller's team's deployments, as the `model` the completion paths take.
export const GET = apiRoute({}, async ({ handle, principal }) => listModels(handle.db, principal.team));
