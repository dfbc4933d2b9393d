import { ImportListQuery } from "@/lib/contracts/imports";
import { validated } from "@/lib/http/route-parts";
import { sessionRoute } from "@/lib/http/session-route";
import { listImports, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The team's imports (the API's list): the pipeline page finds an import still running after a reload.
export const GET = sessionRoute({}, async ({ req, handle, session }) => {
  const q = validated(ImportListQuery, Object.fromEntries(new URL(req.url).searchParams));
  return (await listImports(handle.db, { teamId: session.team.id, ...q })).map(toImportDto);
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
