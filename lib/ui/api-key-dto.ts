import type { ApiKeyDto } from "../contracts/api-keys";

type KeyRow = {
  id: string;
  kind: "api" | "model";
  name: string | null;
  prefix: string;
  deploymentName: string | null;
  capturePipelines: string[] | null;
  createdBy: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
};

/** A row of listApiKeys as the dashboard shows it (never the hash, never the secret). */
export function toApiKeyDto(k: KeyRow): ApiKeyDto {
  return {
    id: k.id,
    kind: k.kind,
    name: k.name,
    prefix: k.prefix,
    deploymentName: k.deploymentName,
    capturePipelines: k.capturePipelines,
    createdBy: k.createdBy,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
  };
}
