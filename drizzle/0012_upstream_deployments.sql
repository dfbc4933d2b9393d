ALTER TABLE "deployments" ADD COLUMN "upstream_kind" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "upstream_urls" text[];--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "upstream_model" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "upstream_key" text;