ALTER TABLE "samples" ADD COLUMN "generation" jsonb;--> statement-breakpoint
-- Captured completions check their pipeline before generating, from a per-process cache of the
-- pipelines found (lib/services/capture.ts): a pipeline deleted or moved is announced like keys.
CREATE TRIGGER pipelines_cache AFTER UPDATE OF team_id, deleted_at OR DELETE ON pipelines
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_notify_cache();
