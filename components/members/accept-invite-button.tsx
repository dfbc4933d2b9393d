"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { uiFetch, UiError } from "../api-client";
import { announceTeam } from "../shell/page-team";
import { Button } from "../ui/button";
import { ErrorBanner } from "../ui/states";

/** Uses the invite: the user joins the team, which becomes their current one. */
export function AcceptInviteButton({ token, teamName }: { token: string; teamName: string }) {
  const router = useRouter();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  return (
    <>
      {error ? <ErrorBanner message={error} /> : null}
      <Button
        className="w-full"
        disabled={pending}
        onClick={async () => {
          setPending(true);
          setError(null);
          try {
            const { team } = await uiFetch<{ team: { id: string } }>("/api/ui/invites/accept", { body: { token } });
            announceTeam(team.id);
            router.push("/pipelines");
            router.refresh();
          } catch (err) {
            setPending(false);
            setError(err instanceof UiError ? err.message : "Joining failed. Try again.");
          }
        }}
      >
        {pending ? "Joining…" : `Join ${teamName}`}
      </Button>
      {error ? (
        <Link
          href="/pipelines"
          className="block text-center text-sm text-indigo-600 hover:underline dark:text-indigo-400"
        >
          Go to the dashboard
        </Link>
      ) : null}
    </>
  );
}
