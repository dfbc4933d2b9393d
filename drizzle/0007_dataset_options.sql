ALTER TABLE "datasets" ADD COLUMN "options" jsonb DEFAULT '{"format":"jsonl","compression":"none","dedupe":false}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "tokenizer_model" text;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "files" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "stats" jsonb;--> statement-breakpoint
-- Datasets packaged before options existed: their one JSONL file, and every selected sample included.
UPDATE "datasets" SET "files" = jsonb_build_array(jsonb_build_object('split', null, 'name', "name" || '.jsonl',
  'samples', "size", 'bytes', "bytes", 'checksum', "checksum", 'key', "blob_key")),
  "stats" = jsonb_build_object('included', "size")
WHERE "status" = 'READY';
