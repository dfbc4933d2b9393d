import { env } from "@/lib/env";
import { apiRoute } from "@/lib/http/api-route";
import { openApiDocument } from "@/lib/openapi/document";

export const dynamic = "force-dynamic";

// The OpenAPI 3.1 document, generated from the zod contracts (lib/openapi). Public: it describes
// the API, not any team's data.
export const GET = apiRoute({ auth: "none" }, async () => openApiDocument(`${env().PUBLIC_URL}`));
