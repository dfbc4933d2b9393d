import { env } from "@/lib/env";
import { apiRoute } from "@/lib/http/api-route";
import { openApiDocument } from "@/lib/openapi/document";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The OpenAPI 3.1 document, generated from the zod contracts (lib/openapi). Public: it describes
// the API, not any team's data.
export const GET = apiRoute({ auth: "none" }, async () => openApiDocument(`${env().PUBLIC_URL}`));

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
