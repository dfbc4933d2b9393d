-- Selections search message text with a trigram index (pg_trgm) that also holds the pipeline id
-- (btree_gin). Both are trusted extensions: a database owner may create them (PostgreSQL 13+).
CREATE EXTENSION IF NOT EXISTS pg_trgm;--> statement-breakpoint
CREATE EXTENSION IF NOT EXISTS btree_gin;--> statement-breakpoint
-- Label values compare byte by byte whatever the database's collation, so a `$prefix` filter is
-- one range of the primary key (a prefix is a range only in code-point order).
ALTER TABLE "sample_labels" ALTER COLUMN "value" TYPE text COLLATE "C";
