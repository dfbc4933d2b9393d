import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignUpForm } from "@/components/auth/sign-up-form";
import { getSessionUser } from "@/lib/auth/session";

export const metadata: Metadata = { title: "Create account · LM Platform" };

export default async function SignUpPage() {
  if (await getSessionUser()) redirect("/pipelines");
  return (
    <>
      <h1 className="text-lg font-semibold">Create your account</h1>
      <p className="mb-6 mt-1 text-sm text-zinc-500 dark:text-zinc-400">You get a team of your own.</p>
      <SignUpForm />
    </>
  );
}
