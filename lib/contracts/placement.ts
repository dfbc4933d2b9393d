// Which deployed models a worker loads, and for which teams (WORKER_SERVES). By default every
// worker loads every model of the deployments table for every team. On a fleet of machines with
// different memory, or with teams that get machines of their own, an operator places them:
//   WORKER_SERVES=Qwen/*,meta-llama/*@q4    model ids (or paths) by glob, optionally one dtype
//   WORKER_SERVES=team:acme                 every deployment of team acme (its own machines)
//   WORKER_SERVES=!team:acme                every deployment but team acme's (the shared ones)
// A deployment is served when some entry matches it (or no entry is a positive one) and no `!`
// entry does. A worker publishes the deployments it leaves out as `excluded`, so one that no
// live worker is set to serve says so (its state's message, a 503 naming WORKER_SERVES) instead of
// waiting for a worker that will never load it.
import { DTYPE_CHOICES, type DtypeChoice } from "./models";

export type Placement =
  | {
      kind: "model";
      /** The model id or path, `*` matching any run of characters (slashes included). */
      model: RegExp;
      /** The deployment's dtype choice (`auto`, `q4`…), when the entry names one after `@`. */
      dtype: DtypeChoice | null;
      /** A `!` entry: what it matches is left out. */
      not: boolean;
      text: string;
    }
  | { kind: "team"; slug: string; not: boolean; text: string };

/** What a placement is matched against: a deployment's model, dtype and team (its slug). */
export interface Placed {
  model: string;
  dtype: string;
  teamSlug: string;
}

const TEAM_SLUG = /^[a-z0-9][a-z0-9-]*$/;

/**
 * Parses WORKER_SERVES: comma-separated `GLOB`, `GLOB@DTYPE` or `team:SLUG` entries, each maybe
 * prefixed with `!`. Throws an Error naming the entry that is not one.
 */
export function parsePlacements(value: string | undefined): Placement[] {
  const entries = (value ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  return entries.map((text): Placement => {
    const not = text.startsWith("!");
    const body = not ? text.slice(1).trim() : text;
    if (body.startsWith("team:")) {
      const slug = body.slice("team:".length);
      if (!TEAM_SLUG.test(slug)) throw new Error(`entry "${text}": team: takes a team's slug (lowercase, digits, -)`);
      return { kind: "team", slug, not, text };
    }
    const at = body.lastIndexOf("@");
    const glob = at >= 0 ? body.slice(0, at) : body;
    const dtype = at >= 0 ? body.slice(at + 1) : null;
    if (!glob) throw new Error(`entry "${text}" names no model (write * for every model)`);
    if (dtype !== null && !(DTYPE_CHOICES as readonly string[]).includes(dtype))
      throw new Error(`entry "${text}": the dtype after @ must be one of ${DTYPE_CHOICES.join(", ")}`);
    const pattern = glob
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*");
    return { kind: "model", model: new RegExp(`^${pattern}$`), dtype: dtype as DtypeChoice | null, not, text };
  });
}

const matches = (p: Placement, d: Placed) =>
  p.kind === "team" ? p.slug === d.teamSlug : p.model.test(d.model) && (p.dtype === null || p.dtype === d.dtype);

/** Whether a worker with these placements serves deployment `d` (no placements: every one). */
export function places(placements: readonly Placement[], d: Placed): boolean {
  const positive = placements.filter((p) => !p.not);
  return (
    (positive.length === 0 || positive.some((p) => matches(p, d))) && !placements.some((p) => p.not && matches(p, d))
  );
}

/**
 * Whether the placements tell teams apart: then a worker serves a (model, dtype) for some teams
 * and not others, and advertises it per team (teamModelKey).
 */
export const placesByTeam = (placements: readonly Placement[]) => placements.some((p) => p.kind === "team");

/**
 * Whose dataset and import jobs a worker with these placements takes: a worker placed on teams
 * only (`team:acme`, its own machine) takes only theirs, and one that leaves teams out
 * (`!team:acme`, the shared ones) takes none of theirs, so that no other team's samples are read
 * on a team's own machines, nor theirs on the shared ones. `only` null: any team's.
 */
export function jobTeams(placements: readonly Placement[]): { only: string[] | null; except: string[] } {
  const positive = placements.filter((p) => !p.not);
  const teamsOnly = positive.length > 0 && positive.every((p) => p.kind === "team");
  return {
    only: teamsOnly ? positive.map((p) => (p as { slug: string }).slug) : null,
    except: placements.filter((p) => p.not && p.kind === "team").map((p) => (p as { slug: string }).slug),
  };
}
