import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { Readable } from "node:stream";
import { assertValidKey, contentTypeOf, type BlobStore, type PutOptions } from "./blob-store";

export type S3Options = {
  bucket: string;
  region: string;
  endpoint?: string;
  forcePathStyle: boolean;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Size of each multipart part (S3's minimum is 5 MiB). */
  partSizeBytes?: number;
};

/**
 * Blobs in an S3 bucket (AWS or any S3-compatible endpoint). Files are streamed with
 * lib-storage's multipart upload: parts of `partSizeBytes`, four in flight, so memory stays
 * bounded whatever the file size; the object appears only when the upload completes, and an
 * aborted upload is aborted on the server too. (Parts of uploads whose writer was killed stay
 * until the bucket's lifecycle rule for incomplete multipart uploads removes them.)
 */
export class S3BlobStore implements BlobStore {
  readonly client: S3Client;

  constructor(readonly options: S3Options) {
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle,
      credentials:
        options.accessKeyId && options.secretAccessKey
          ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey }
          : undefined,
      // Default checksums (CRC32 trailers) are not understood by every S3-compatible server.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  async put(key: string, body: AsyncIterable<Uint8Array>, options: PutOptions = {}): Promise<void> {
    assertValidKey(key);
    const upload = new Upload({
      client: this.client,
      params: {
        Bucket: this.options.bucket,
        Key: key,
        Body: Readable.from(body),
        ContentType: options.contentType ?? contentTypeOf(key),
      },
      partSize: this.options.partSizeBytes ?? 8 * 1024 * 1024,
      queueSize: 4,
      leavePartsOnError: false,
    });
    const abort = () => void upload.abort().catch(() => {});
    options.signal?.addEventListener("abort", abort, { once: true });
    try {
      await upload.done();
    } finally {
      options.signal?.removeEventListener("abort", abort);
    }
    options.signal?.throwIfAborted();
  }

  async *read(key: string, options: { start?: number } = {}): AsyncIterable<Uint8Array> {
    assertValidKey(key);
    const start = options.start ?? 0;
    const res = await this.client.send(
      new GetObjectCommand({ Bucket: this.options.bucket, Key: key, Range: start > 0 ? `bytes=${start}-` : undefined }),
    );
    yield* res.Body as Readable;
  }

  async removePrefix(prefix: string): Promise<void> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.options.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.options.bucket, Key: object.Key! }));
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async downloadUrl(key: string, options: { ttlSeconds: number; filename?: string }) {
    assertValidKey(key);
    const command = new GetObjectCommand({
      Bucket: this.options.bucket,
      Key: key,
      ResponseContentDisposition: options.filename ? `attachment; filename="${options.filename}"` : undefined,
    });
    const now = Date.now();
    const url = await getSignedUrl(this.client, command, { expiresIn: options.ttlSeconds });
    return { url, expiresAt: new Date(Math.floor(now / 1000) * 1000 + options.ttlSeconds * 1000) };
  }
}
