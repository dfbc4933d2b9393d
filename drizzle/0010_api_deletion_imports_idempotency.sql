CREATE TABLE "imports" (
	"id" text PRIMARY KEY NOT NULL,
	"team_id" text NOT NULL,
	"pipeline_id" text NOT NULL,
	"status" text DEFAULT 'PROCESSING' NOT NULL,
	"blob_key" text NOT NULL,
	"bytes" bigint NOT NULL,
	"bytes_read" bigint DEFAULT 0 NOT NULL,
	"lines_read" integer DEFAULT 0 NOT NULL,
	"imported" integer DEFAULT 0 NOT NULL,
	"refused" integer DEFAULT 0 NOT NULL,
	"refusals" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"error" text,
	"lease_owner" text,
	"lease_expires_at" timestamp with time zone,
	"attempts" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"team_id" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"status" integer,
	"response" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_team_id_key_pk" PRIMARY KEY("team_id","key")
);
--> statement-breakpoint
ALTER TABLE "datasets" DROP CONSTRAINT "datasets_pipeline_id_pipelines_id_fk";
--> statement-breakpoint
ALTER TABLE "pipelines" ADD COLUMN "retention_days" integer;--> statement-breakpoint
ALTER TABLE "pipelines" ADD COLUMN "deleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "datasets" ADD COLUMN "contains_deleted_samples" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "imports" ADD CONSTRAINT "imports_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "imports" ADD CONSTRAINT "imports_pipeline_id_pipelines_id_fk" FOREIGN KEY ("pipeline_id") REFERENCES "public"."pipelines"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "imports_processing_idx" ON "imports" USING btree ("lease_expires_at") WHERE "imports"."status" = 'PROCESSING';--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "pipelines_retention_idx" ON "pipelines" USING btree ("id") WHERE "pipelines"."retention_days" is not null or "pipelines"."deleted_at" is not null;