/**
 * Where to go after signing in: a path on this site, never another origin (no open redirect).
 * The URL is resolved the way a browser resolves it (which drops tabs and newlines and reads
 * `\` as `/`, so `/\tevil.example` and `/\evil.example` mean `//evil.example`), and only a result
 * on the same origin is kept, as its path, query and fragment.
 */
export function safeCallback(url: string | undefined | null): string {
  const fallback = "/pipelines";
  if (!url || !url.startsWith("/")) return fallback;
  const base = "http://this.site";
  let resolved: URL;
  try {
    resolved = new URL(url, base);
  } catch {
    return fallback;
  }
  if (resolved.origin !== base) return fallback;
  // A path that begins with "//" once resolved (`/.//evil.example`, `/a/..//evil.example`) is
  // another host's address to a browser.
  if (resolved.pathname.startsWith("//")) return fallback;
  return `${resolved.pathname}${resolved.search}${resolved.hash}`;
}

/** The invite token of a callback that is an invite link's page (`/invite/<token>`), or null. */
export function inviteIn(url: string | undefined | null): string | null {
  const m = /^\/invite\/([^/?#]+)$/.exec(safeCallback(url));
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return null;
  }
}
