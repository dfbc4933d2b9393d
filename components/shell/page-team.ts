"use client";

import { useRouter } from "next/navigation";
import { useEffect } from "react";

/**
 * The team a dashboard page was rendered for. The current team is a cookie that every tab of the
 * browser shares: a tab still showing team A while another switched to B would otherwise act on
 * B (a deployment deleted by name, a key made) under A's heading. The dashboard's requests say
 * which team their page shows (`x-lmp-team`), and the server refuses a request for another
 * team than the current one with a 409. Tabs also tell each other when the team changes, and
 * reload their data then.
 */
export const PAGE_TEAM_HEADER = "x-lmp-team";
const CHANNEL = "lmp-team";

/** The page's team (the dashboard layout's `<meta name="lmp-team">`), undefined elsewhere. */
export function pageTeam(): string | undefined {
  if (typeof document === "undefined") return undefined;
  return document.querySelector<HTMLMetaElement>('meta[name="lmp-team"]')?.content || undefined;
}

/** The headers that say which team the page shows. */
export function pageTeamHeaders(): Record<string, string> {
  const team = pageTeam();
  return team ? { [PAGE_TEAM_HEADER]: team } : {};
}

/** Tells the browser's other tabs that the current team is now `teamId`. */
export function announceTeam(teamId: string): void {
  if (typeof BroadcastChannel === "undefined") return;
  const channel = new BroadcastChannel(CHANNEL);
  channel.postMessage(teamId);
  channel.close();
}

/** Reloads the page's data when another tab makes another team the current one. */
export function TeamSync({ teamId }: { teamId: string }) {
  const router = useRouter();
  useEffect(() => {
    if (typeof BroadcastChannel === "undefined") return;
    const channel = new BroadcastChannel(CHANNEL);
    channel.onmessage = (e: MessageEvent) => {
      if (e.data !== teamId) router.refresh();
    };
    return () => channel.close();
  }, [teamId, router]);
  return null;
}
