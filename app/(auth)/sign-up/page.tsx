import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignUpForm } from "@/components/auth/sign-up-form";
import Link from "next/link";
import { buttonClass } from "@/components/ui/button";
import { getSessionUser } from "@/lib/auth/session";
import { env } from "@/lib/env";
import { inviteIn, safeCallback } from "@/lib/ui/safe-callback";

export const metadata: Metadata = { title: "Create account · LM Platform" };

export default async function SignUpPage({ searchParams }: { searchParams: Promise<{ callbackUrl?: string }> }) {
  const { callbackUrl } = await searchParams;
  if (await getSessionUser()) redirect(safeCallback(callbackUrl));
  if (env().SIGN_UP === "invite") {
    // Accounts are made with an invite link only: the new user joins its team (none of their own).
    const invite = inviteIn(callbackUrl);
    if (!invite)
      return (
        <>
          <h1 className="text-lg font-semibold">Accounts are made with an invite link</h1>
          <p role="status" className="mt-2 text-sm text-zinc-600 dark:text-zinc-400">
            This server does not take sign-ups: ask a team owner for an invite link, and open it.
          </p>
          <Link href="/sign-in" className={`${buttonClass("secondary")} mt-6 w-full`}>
            Sign in
          </Link>
        </>
      );
    return (
      <>
        <h1 className="text-lg font-semibold">Create your account</h1>
        <p className="mb-6 mt-1 text-sm text-zinc-500 dark:text-zinc-400">You join the team that invited you.</p>
        <SignUpForm callbackUrl="/pipelines" invite={invite} />
      </>
    );
  }
  return (
    <>
      <h1 className="text-lg font-semibold">Create your account</h1>
      <p className="mb-6 mt-1 text-sm text-zinc-500 dark:text-zinc-400">You get a team of your own.</p>
      <SignUpForm callbackUrl={callbackUrl} />
    </>
  );
}
