-- The dashboard's playground counted its usage under its members' rate-limit ids
-- ('member:<user>:<team>') instead of '' (no key): each member showed as a deleted key, and the
-- ids reached anyone with an API key of the team (GET /v1/usage?groupBy=key). Fold those rows
-- into the playground's.
DO $$
DECLARE r usage_daily%ROWTYPE;
BEGIN
  FOR r IN DELETE FROM usage_daily WHERE key_id LIKE 'member:%' RETURNING * LOOP
    INSERT INTO usage_daily AS u (day, team_id, key_id, deployment_id, requests, prompt_tokens,
                                  completion_tokens, ttft_count, ttft_sum_ms, ttft_histogram)
    VALUES (r.day, r.team_id, '', r.deployment_id, r.requests, r.prompt_tokens, r.completion_tokens,
            r.ttft_count, r.ttft_sum_ms, r.ttft_histogram)
    ON CONFLICT (team_id, day, key_id, deployment_id) DO UPDATE SET
      requests = u.requests + excluded.requests,
      prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
      completion_tokens = u.completion_tokens + excluded.completion_tokens,
      ttft_count = u.ttft_count + excluded.ttft_count,
      ttft_sum_ms = u.ttft_sum_ms + excluded.ttft_sum_ms,
      ttft_histogram = array(select a + b from unnest(u.ttft_histogram, excluded.ttft_histogram) as t(a, b));
  END LOOP;
END $$;
