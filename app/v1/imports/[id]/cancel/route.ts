import { blobStore } from "@/lib/blob";
import { apiRoute } from "@/lib/http/api-route";
import { cancelImport, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// Stops a PROCESSING import; what it stored stays (a selection's `importId` finds it).
export const POST = apiRoute({}, async ({ handle, principal, params }) =>
  toImportDto(await cancelImport(handle.db, blobStore(), { teamId: principal.team.id, id: params.id! })),
);

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
