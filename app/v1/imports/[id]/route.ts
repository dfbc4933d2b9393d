import { apiRoute } from "@/lib/http/api-route";
import { getImport, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// An import's status and progress (lines read, imported, refused, the first refusals).
export const GET = apiRoute({}, async ({ handle, principal, params }) =>
  toImportDto(await getImport(handle.db, { teamId: principal.team.id, id: params.id! })),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
