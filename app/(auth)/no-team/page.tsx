import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { SignOutButton } from "@/components/auth/sign-out-button";
import { currentTeamContext, getSessionUser } from "@/lib/auth/session";

export const metadata: Metadata = { title: "No team · LM Platform" };
export const dynamic = "force-dynamic";

/** A signed-in user who belongs to no team (they left it, or were removed from it). */
export default async function NoTeamPage() {
  const user = await getSessionUser();
  if (!user) redirect("/sign-in");
  if (await currentTeamContext()) redirect("/pipelines");
  return (
    <>
      <h1 className="text-lg font-semibold">You are not in any team</h1>
      <p className="mt-2 text-sm text-zinc-600 dark:text-zinc-400">
        <span className="font-medium">{user.email}</span> is not a member of a team any more. Ask a team&apos;s owner
        for an invite link and open it while signed in, or sign out to use another account.
      </p>
      <div className="mt-6">
        <SignOutButton />
      </div>
    </>
  );
}
