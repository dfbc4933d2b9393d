"use client";

import { useRouter } from "next/navigation";
import { useState } from "react";
import { uiFetch } from "../api-client";
import { announceTeam } from "./page-team";
import { Select } from "../ui/field";

type TeamOption = { id: string; name: string; slug: string };

/** Shown when the user belongs to several teams; the choice is a cookie the server re-checks. */
export function TeamSwitcher({ teams, currentId }: { teams: TeamOption[]; currentId: string }) {
  const router = useRouter();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  if (teams.length < 2) {
    const team = teams[0];
    return (
      <div className="px-2.5 text-sm">
        <div className="font-medium">{team?.name}</div>
        <div className="text-xs text-zinc-500 dark:text-zinc-400">{team?.slug}</div>
      </div>
    );
  }
  return (
    <div className="space-y-1 px-1">
      <label htmlFor="team-switcher" className="px-1.5 text-xs font-medium text-zinc-500 dark:text-zinc-400">
        Team
      </label>
      <Select
        id="team-switcher"
        value={currentId}
        disabled={pending}
        onChange={async (e) => {
          const teamId = e.target.value;
          setPending(true);
          setError(null);
          try {
            await uiFetch("/api/ui/team", { body: { teamId } });
            announceTeam(teamId);
            // Every page shows the team's own data: start again from the pipelines list.
            router.push("/pipelines");
            router.refresh();
          } catch (err) {
            // Removed from that team meanwhile, rate-limited, offline: say so, and reload the list.
            setError(err instanceof Error ? err.message : "Switching teams failed.");
            router.refresh();
          } finally {
            setPending(false);
          }
        }}
      >
        {teams.map((t) => (
          <option key={t.id} value={t.id}>
            {t.name}
          </option>
        ))}
      </Select>
      {error ? (
        <p role="alert" className="px-1.5 text-xs text-red-600 dark:text-red-400">
          {error}
        </p>
      ) : null}
    </div>
  );
}
