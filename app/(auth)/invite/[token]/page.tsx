import { Time } from "@/components/ui/time";
import type { Metadata } from "next";
import Link from "next/link";
import { AcceptInviteButton } from "@/components/members/accept-invite-button";
import { buttonClass } from "@/components/ui/button";
import { getSessionUser } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { ApiError } from "@/lib/errors";
import { inviteOf } from "@/lib/services/members";

export const metadata: Metadata = { title: "Join a team · LM Platform", robots: { index: false } };
export const dynamic = "force-dynamic";

/**
 * An invite link: what it offers, then sign in (or create an account) and accept. Opening the
 * page uses nothing up (link previews fetch it too): the invite is used by the Accept button.
 */
export default async function InvitePage({ params }: { params: Promise<{ token: string }> }) {
  const { token } = await params;
  const invite = await inviteOf(getDb().db, token).catch((err: unknown) => {
    if (err instanceof ApiError && err.status === 404) return err;
    throw err;
  });
  if (invite instanceof ApiError) {
    return (
      <>
        <h1 className="text-lg font-semibold">Invite link not valid</h1>
        <p role="alert" className="mt-2 text-sm text-zinc-600 dark:text-zinc-400">
          {invite.message}
        </p>
        <Link href="/pipelines" className={`${buttonClass("secondary")} mt-6 w-full`}>
          Go to the dashboard
        </Link>
      </>
    );
  }
  const user = await getSessionUser();
  const here = `/invite/${encodeURIComponent(token)}`;
  return (
    <>
      <h1 className="text-lg font-semibold">Join {invite.team.name}</h1>
      <p className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">
        You are invited to the <span className="font-medium">{invite.team.name}</span> team as{" "}
        {invite.role === "owner" ? "an owner" : "a member"}. The link expires{" "}
        <Time iso={invite.expiresAt.toISOString()} />.
      </p>
      {user ? (
        <div className="mt-6 space-y-3">
          <p className="text-sm text-zinc-600 dark:text-zinc-400">
            Signed in as <span className="font-medium">{user.email}</span>.
          </p>
          <AcceptInviteButton token={token} teamName={invite.team.name} />
        </div>
      ) : (
        <div className="mt-6 flex flex-col gap-2">
          <Link href={`/sign-in?callbackUrl=${encodeURIComponent(here)}`} className={buttonClass("primary")}>
            Sign in to accept
          </Link>
          <Link href={`/sign-up?callbackUrl=${encodeURIComponent(here)}`} className={buttonClass("secondary")}>
            Create an account
          </Link>
        </div>
      )}
    </>
  );
}
