// CORS for the deployment endpoints: browsers call them from any origin (the spec's example
// client is a page with an EventSource). Credentials are bearer keys, never cookies, so a
// wildcard origin exposes nothing a caller does not already hold.
export const CORS_HEADERS: Record<string, string> = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  // The X-Pipeline-* headers: a browser may ask for its completion to be captured (docs/api.md).
  "access-control-allow-headers":
    "authorization, content-type, last-event-id, cache-control, x-pipeline-id, x-pipeline-user-id, x-pipeline-group-id, x-pipeline-metadata",
  // Headers a browser script may read beyond the safelisted ones: when to retry a 429 or 503, and
  // the key's rate-limit state (before, only the request id: a page could not honour Retry-After).
  "access-control-expose-headers": "x-request-id, retry-after, ratelimit-limit, ratelimit-remaining, ratelimit-reset",
  "access-control-max-age": "86400",
};
