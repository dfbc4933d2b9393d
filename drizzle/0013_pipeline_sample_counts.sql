CREATE TABLE "pipeline_sample_counts" (
	"pipeline_id" text NOT NULL,
	"shard" smallint NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "pipeline_sample_counts_pipeline_id_shard_pk" PRIMARY KEY("pipeline_id","shard")
);
--> statement-breakpoint
-- Kept by Postgres at each statement that inserts or deletes samples (add, add-batch, import's
-- COPY, capture, deletion, a pipeline's cascade, psql), in its transaction: see
-- lib/db/schema/pipelines.ts. Each backend adds to its own shard, so concurrent writers to one
-- pipeline do not wait for each other's commit on one row; a statement that touches several pipelines
-- takes their rows in order of id, so that two such statements cannot deadlock.
CREATE FUNCTION lmp_count_inserted_samples() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pipeline_sample_counts AS c (pipeline_id, shard, n)
    SELECT pipeline_id, pg_backend_pid() % 16, count(*) FROM inserted_samples GROUP BY pipeline_id ORDER BY pipeline_id
    ON CONFLICT (pipeline_id, shard) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION lmp_count_deleted_samples() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pipeline_sample_counts AS c (pipeline_id, shard, n)
    SELECT pipeline_id, pg_backend_pid() % 16, -count(*) FROM deleted_samples d
    -- Not for a pipeline being deleted (its samples go by the cascade): its counts go with it.
    WHERE EXISTS (SELECT 1 FROM pipelines p WHERE p.id = d.pipeline_id)
    GROUP BY pipeline_id ORDER BY pipeline_id
    ON CONFLICT (pipeline_id, shard) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;--> statement-breakpoint
-- A deleted pipeline's counts (its samples, if any are left, go by its foreign key's cascade).
CREATE FUNCTION lmp_forget_pipeline_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM pipeline_sample_counts c USING deleted_pipelines p WHERE c.pipeline_id = p.id;
  RETURN NULL;
END $$;--> statement-breakpoint
-- TRUNCATE (no row triggers, no transition table) empties every pipeline.
CREATE FUNCTION lmp_forget_all_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM pipeline_sample_counts;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER samples_count_insert AFTER INSERT ON samples REFERENCING NEW TABLE AS inserted_samples
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_count_inserted_samples();--> statement-breakpoint
CREATE TRIGGER samples_count_delete AFTER DELETE ON samples REFERENCING OLD TABLE AS deleted_samples
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_count_deleted_samples();--> statement-breakpoint
CREATE TRIGGER samples_count_truncate AFTER TRUNCATE ON samples
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_forget_all_counts();--> statement-breakpoint
CREATE TRIGGER pipelines_forget_counts AFTER DELETE ON pipelines REFERENCING OLD TABLE AS deleted_pipelines
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_forget_pipeline_counts();--> statement-breakpoint
-- The samples stored before this migration.
INSERT INTO pipeline_sample_counts (pipeline_id, shard, n)
  SELECT pipeline_id, 0, count(*) FROM samples GROUP BY pipeline_id;
