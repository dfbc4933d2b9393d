import type { NextAuthOptions } from "next-auth";
import CredentialsProvider from "next-auth/providers/credentials";
import { z } from "zod";
import { getDb } from "../db/client";
import { env } from "../env";
import { clientAddress } from "../http/client-address";
import { takeSignIn } from "../limits";
import { authenticateUser } from "../services/users";

/** What the sign-in form posts: only its shape is checked here, the password rules apply at sign-up. */
const Credentials = z.object({ email: z.string().trim().min(1).max(320), password: z.string().min(1).max(200) });

let cached: NextAuthOptions | undefined;

/**
 * next-auth (v4) for the dashboard: email + password against the users table, JWT sessions
 * (no session table). Built on first use, not at import, so `next build` needs no configuration.
 */
export function authOptions(): NextAuthOptions {
  if (cached) return cached;
  const e = env();
  // next-auth reads its base URL (redirects, cookie security) from NEXTAUTH_URL.
  process.env.NEXTAUTH_URL ??= e.PUBLIC_URL;
  cached = {
    secret: e.AUTH_SECRET,
    session: { strategy: "jwt", maxAge: 30 * 24 * 3600 },
    pages: { signIn: "/sign-in" },
    providers: [
      CredentialsProvider({
        name: "Email",
        credentials: { email: { label: "Email", type: "email" }, password: { label: "Password", type: "password" } },
        async authorize(raw, req) {
          const parsed = Credentials.safeParse(raw);
          if (!parsed.success) return null;
          // Each attempt costs a few hundred ms of scrypt: limited per account and per address.
          // The thrown message reaches the sign-in form as the error.
          const headers = (req?.headers ?? {}) as Record<string, string | undefined>;
          takeSignIn(
            parsed.data.email.toLowerCase(),
            clientAddress((name) => headers[name]),
          );
          const user = await authenticateUser(getDb().db, parsed.data.email, parsed.data.password);
          return user ? { id: user.id, email: user.email, name: user.name, sv: user.sessionVersion } : null;
        },
      }),
    ],
    callbacks: {
      jwt({ token, user }) {
        if (user) {
          token.uid = user.id;
          // The user's session version when signed in (lib/auth/session.ts getSessionUser).
          token.sv = (user as { sv?: number }).sv ?? 0;
        }
        return token;
      },
      session({ session, token }) {
        if (session.user && typeof token.uid === "string") {
          const u = session.user as { id?: string; sv?: number };
          u.id = token.uid;
          u.sv = typeof token.sv === "number" ? token.sv : 0;
        }
        return session;
      },
    },
  };
  return cached;
}
