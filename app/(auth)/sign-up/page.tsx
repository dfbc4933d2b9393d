import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignUpForm } from "@/components/auth/sign-up-form";
import { getSessionUser } from "@/lib/auth/session";
import { safeCallback } from "@/lib/ui/safe-callback";

export const metadata: Metadata = { title: "Create account · LM Platform" };

export default async function SignUpPage({ searchParams }: { searchParams: Promise<{ callbackUrl?: string }> }) {
  const { callbackUrl } = await searchParams;
  if (await getSessionUser()) redirect(safeCallback(callbackUrl));
  return (
    <>
      <h1 className="text-lg font-semibold">Create your account</h1>
      <p className="mb-6 mt-1 text-sm text-zinc-500 dark:text-zinc-400">You get a team of your own.</p>
      <SignUpForm callbackUrl={callbackUrl} />
    </>
  );
}
