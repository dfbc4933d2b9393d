ALTER TABLE "samples" ADD COLUMN "import_id" text;--> statement-breakpoint
CREATE INDEX "imports_team_order_idx" ON "imports" USING btree ("team_id","created_at","id");