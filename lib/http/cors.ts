// CORS for the deployment endpoints: browsers call them from any origin (the spec's example
// client is a page with an EventSource). Credentials are bearer keys, never cookies, so a
// wildcard origin exposes nothing a caller does not already hold.
export const CORS_HEADERS: Record<string, string> = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  // The X-Pipeline-* headers: a browser may ask for its completion to be captured (docs/api.md).
  "access-control-allow-headers":
    "authorization, content-type, last-event-id, cache-control, x-pipeline-id, x-pipeline-user-id, x-pipeline-group-id, x-pipeline-metadata",
  "access-control-expose-headers": "x-request-id",
  "access-control-max-age": "86400",
};
