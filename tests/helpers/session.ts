import { expect } from "vitest";
import { baseUrl, client } from "./context";

/** Dashboard sessions for tests: sign-up and next-auth's credentials sign-in, as the browser does them. */
export const PASSWORD = "correct horse battery";
export const email = () => `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.com`;

export function cookiesOf(res: Response): string[] {
  return res.headers.getSetCookie().map((c) => c.split(";")[0]!);
}

/**
 * One sign-in through next-auth's credentials flow, as the browser does it (against `url`, with
 * extra `headers`): the cookies it set up, the session cookie if it succeeded, next-auth's error
 * (the sign-in form's message) if it did not, and the status.
 */
export async function signInAttempt(
  address: string,
  password: string,
  { url = baseUrl, headers = {} }: { url?: string; headers?: Record<string, string> } = {},
) {
  const csrf = await fetch(`${url}/api/auth/csrf`);
  const { csrfToken } = (await csrf.json()) as { csrfToken: string };
  const jar = cookiesOf(csrf);
  const res = await fetch(`${url}/api/auth/callback/credentials`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: jar.join("; "), ...headers },
    body: new URLSearchParams({ csrfToken, email: address, password, json: "true" }),
  });
  const session = cookiesOf(res).find((c) => c.startsWith("next-auth.session-token="));
  const location = res.headers.get("location") ?? ((await res.json().catch(() => ({}))) as { url?: string }).url;
  const error = location ? new URL(location, url).searchParams.get("error") : null;
  return { jar, session, error, status: res.status };
}

/** Signs in through next-auth's credentials flow, as the browser does; returns the Cookie header. */
export async function signIn(address: string, password = PASSWORD): Promise<string> {
  const { jar, session, status } = await signInAttempt(address, password);
  if (!session) throw new Error(`sign-in failed for ${address} (${status})`);
  return [...jar, session].join("; ");
}

export async function signUp(body: Record<string, unknown>) {
  return client().post("/api/ui/sign-up", body);
}

export async function newUser(teamName?: string) {
  const address = email();
  const res = await signUp({ email: address, password: PASSWORD, teamName });
  expect(res.status).toBe(201);
  return { email: address, team: res.json.team as { id: string; slug: string }, cookie: await signIn(address) };
}

export const as = (cookie: string) => ({
  get: (path: string) => client().get(path, { cookie }),
  post: (path: string, body: unknown = {}, headers: Record<string, string> = {}) =>
    client().post(path, body, { cookie, ...headers }),
});
