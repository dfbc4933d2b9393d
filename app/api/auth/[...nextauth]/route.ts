import NextAuth from "next-auth";
import { NextRequest } from "next/server";
import { authOptions } from "@/lib/auth/next-auth-options";
import { readBodyBytes } from "@/lib/http/body";
import { errorResponse, newRequestId } from "@/lib/http/respond";

export const dynamic = "force-dynamic";

type Ctx = { params: Promise<{ nextauth: string[] }> };

/**
 * next-auth's forms (sign-in, sign-out, CSRF) are a few hundred bytes. next-auth itself reads
 * whatever it is sent (`req.json()`), before the sign-in's rate limit: without this bound, a few
 * anonymous half-gigabyte POSTs would take the app's memory, every team's service with it.
 */
const AUTH_BODY_LIMIT = 64 * 1024;

// Options are built per request (on first use): `next build` imports this module without configuration.
async function handler(req: NextRequest, ctx: Ctx) {
  if (req.method === "POST") {
    let body: Buffer;
    try {
      body = await readBodyBytes(req, AUTH_BODY_LIMIT);
    } catch (err) {
      return errorResponse(err, newRequestId());
    }
    req = new NextRequest(req.url, { method: "POST", headers: req.headers, body: new Uint8Array(body) });
  }
  return NextAuth(req as never, ctx as never, authOptions());
}

export { handler as GET, handler as POST };
