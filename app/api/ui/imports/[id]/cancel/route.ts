import { blobStore } from "@/lib/blob";
import { sessionRoute } from "@/lib/http/session-route";
import { cancelImport, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The upload dialog's "Cancel import".
export const POST = sessionRoute({}, async ({ handle, session, params }) =>
  toImportDto(await cancelImport(handle.db, blobStore(), { teamId: session.team.id, id: params.id! })),
);

export const { GET, PUT, PATCH, DELETE } = otherMethods("POST");
