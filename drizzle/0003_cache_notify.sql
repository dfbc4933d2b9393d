-- App processes cache API keys and deployments by the value a request presents (key hash,
-- team slug + deployment name) and LISTEN on lmp_cache: a change to what those lookups read is
-- announced here, at commit, whichever process or tool made it (the app, the CLI, psql).
CREATE FUNCTION lmp_notify_cache() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('lmp_cache', TG_TABLE_NAME);
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER api_keys_cache AFTER UPDATE OF hash, kind, team_id, deployment_id, revoked_at OR DELETE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_notify_cache();--> statement-breakpoint
CREATE TRIGGER teams_cache AFTER UPDATE OR DELETE ON teams
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_notify_cache();--> statement-breakpoint
CREATE TRIGGER deployments_cache AFTER INSERT OR UPDATE OR DELETE ON deployments
  FOR EACH STATEMENT EXECUTE FUNCTION lmp_notify_cache();
