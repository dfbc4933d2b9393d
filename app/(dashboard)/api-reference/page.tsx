import type { Metadata } from "next";
import { ApiReference } from "@/components/api-reference/api-reference";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { env } from "@/lib/env";
import { openApiDocument } from "@/lib/openapi/document";

export const metadata: Metadata = { title: "API reference · LM Platform" };

// The OpenAPI document (also GET /v1/openapi.json), rendered on the server: no script, no CDN.
export default async function ApiReferencePage() {
  await requireTeamContext("/api-reference");
  const doc = openApiDocument(env().PUBLIC_URL);
  return (
    <>
      <PageHeader
        title="API reference"
        description={
          <>
            Every endpoint, generated from the API&apos;s own contracts.{" "}
            <a className="text-indigo-600 hover:underline dark:text-indigo-400" href="/v1/openapi.json">
              openapi.json
            </a>{" "}
            for code generators and SDKs.
          </>
        }
      />
      <ApiReference doc={doc as never} />
    </>
  );
}
