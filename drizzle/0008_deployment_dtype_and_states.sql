ALTER TABLE "deployments" ADD COLUMN "dtype" text DEFAULT 'auto' NOT NULL;--> statement-breakpoint
ALTER TABLE "workers" ADD COLUMN "model_states" jsonb DEFAULT '{}'::jsonb NOT NULL;