import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import S3rver from "s3rver";
import type { S3Options } from "@/lib/blob/s3-blob-store";

/**
 * A real S3-compatible server (s3rver, files in a temporary folder) on a free loopback port,
 * with one bucket. `env` configures a worker process for it; `options` an S3BlobStore.
 */
export async function startS3Server(bucket = "datasets"): Promise<{
  options: S3Options;
  env: Record<string, string>;
  stop: () => Promise<void>;
}> {
  const directory = mkdtempSync(path.join(os.tmpdir(), "lmp-s3-"));
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    directory,
    silent: true,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  // s3rver's fixed credentials.
  const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };
  return {
    options: { bucket, region: "us-east-1", endpoint, forcePathStyle: true, ...credentials },
    env: {
      BLOB_DRIVER: "s3",
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: credentials.accessKeyId,
      S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      S3_FORCE_PATH_STYLE: "true",
    },
    stop: async () => {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
