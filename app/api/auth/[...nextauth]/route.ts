import NextAuth from "next-auth";
import { authOptions } from "@/lib/auth/next-auth-options";

export const dynamic = "force-dynamic";

type Ctx = { params: Promise<{ nextauth: string[] }> };

// Options are built per request (on first use): `next build` imports this module without configuration.
const handler = (req: Request, ctx: Ctx) => NextAuth(req as never, ctx as never, authOptions());

export { handler as GET, handler as POST };
