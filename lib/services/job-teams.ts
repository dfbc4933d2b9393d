import { sql, type SQL } from "drizzle-orm";
import type { jobTeams } from "../contracts/placement";

/** Whose jobs a worker takes (jobTeams in lib/contracts/placement.ts). */
export type JobTeams = ReturnType<typeof jobTeams>;

/** The claim's condition on `q.team_id` (see jobTeams in lib/contracts/placement.ts). */
export function jobTeamsCondition(teams: { only: string[] | null; except: string[] } | undefined): SQL {
  if (!teams) return sql`true`;
  const only = teams.only
    ? sql`q.team_id in (select id from teams where slug in (select jsonb_array_elements_text(${JSON.stringify(teams.only)}::jsonb)))`
    : sql`true`;
  const except =
    teams.except.length > 0
      ? sql`q.team_id not in (select id from teams where slug in (select jsonb_array_elements_text(${JSON.stringify(teams.except)}::jsonb)))`
      : sql`true`;
  return sql`(${only} and ${except})`;
}
