ALTER TABLE "datasets" ADD COLUMN "until_created_at" timestamp(6) with time zone;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "until_sample_id" text;