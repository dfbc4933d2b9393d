import { sessionRoute } from "@/lib/http/session-route";
import { getImport, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// An import's progress, polled by the dashboard's upload dialog.
export const GET = sessionRoute({}, async ({ handle, session, params }) =>
  toImportDto(await getImport(handle.db, { teamId: session.team.id, id: params.id! })),
);

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
