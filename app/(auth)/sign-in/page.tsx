import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignInForm } from "@/components/auth/sign-in-form";
import { getSessionUser } from "@/lib/auth/session";
import { env } from "@/lib/env";
import { inviteIn, safeCallback } from "@/lib/ui/safe-callback";

export const metadata: Metadata = { title: "Sign in · LM Platform" };

export default async function SignInPage({ searchParams }: { searchParams: Promise<{ callbackUrl?: string }> }) {
  const { callbackUrl } = await searchParams;
  if (await getSessionUser()) redirect(safeCallback(callbackUrl));
  return (
    <>
      <h1 className="mb-6 text-lg font-semibold">Sign in to your team</h1>
      <SignInForm callbackUrl={callbackUrl} signUpOpen={env().SIGN_UP === "open" || Boolean(inviteIn(callbackUrl))} />
    </>
  );
}
