import { ImportListQuery } from "@/lib/contracts/imports";
import { apiRoute } from "@/lib/http/api-route";
import { validated } from "@/lib/http/route-parts";
import { listImports, toImportDto } from "@/lib/services/imports";
import { otherMethods } from "@/lib/http/other-methods";

export const dynamic = "force-dynamic";

// The team's imports, newest first (`pipelineId`, `status`, `limit`, `before` in the query).
export const GET = apiRoute({}, async ({ req, handle, principal }) => {
  const q = validated(ImportListQuery, Object.fromEntries(new URL(req.url).searchParams));
  return (await listImports(handle.db, { teamId: principal.team.id, ...q })).map(toImportDto);
});

export const { POST, PUT, PATCH, DELETE } = otherMethods("GET");
