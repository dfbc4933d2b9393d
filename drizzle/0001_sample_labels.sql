CREATE TABLE "sample_labels" (
	"pipeline_id" text NOT NULL,
	"key" text NOT NULL,
	"value" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"sample_id" text NOT NULL,
	CONSTRAINT "sample_labels_pipeline_id_key_value_created_at_sample_id_pk" PRIMARY KEY("pipeline_id","key","value","created_at","sample_id")
);
--> statement-breakpoint
DROP INDEX "samples_metadata_idx";--> statement-breakpoint
ALTER TABLE "sample_labels" ADD CONSTRAINT "sample_labels_pipeline_id_pipelines_id_fk" FOREIGN KEY ("pipeline_id") REFERENCES "public"."pipelines"("id") ON DELETE cascade ON UPDATE no action;