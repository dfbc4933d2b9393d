import { and, eq, sql } from "drizzle-orm";
import { SignUpInput, UserInput } from "../contracts/users";
import type { DbOrTx } from "../db/client";
import { memberships, users, type Team, type User } from "../db/schema";
import { ApiError, conflict, fromZodError, notFound } from "../errors";
import { hashPassword, needsRehash, verifyNothing, verifyPassword } from "../auth/password";
import { newId, randomToken } from "../ids";
import { takeInvite } from "./members";
import { createTeam } from "./teams";
import { logger } from "../observe/log";

// The schemas live in lib/contracts (the dashboard's forms use them too); re-exported here.
export { SignUpInput, UserInput };

/** A validated user with the password hashed: hashing (a few hundred ms) happens before any transaction. */
export type PreparedUser = { email: string; name: string | null; passwordHash: string };

export async function prepareUser(input: { email: string; password: string; name?: string }): Promise<PreparedUser> {
  const parsed = UserInput.safeParse(input);
  if (!parsed.success) throw fromZodError(parsed.error);
  return {
    email: parsed.data.email,
    name: parsed.data.name || null,
    passwordHash: await hashPassword(parsed.data.password),
  };
}

/** Inserts a prepared user as a member of `teamId` (owner when `role` says so). */
export async function insertUser(
  db: DbOrTx,
  user: PreparedUser,
  input: { teamId: string; role?: "owner" | "member" },
): Promise<User> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .insert(users)
      .values({ id: newId("user"), email: user.email, name: user.name, passwordHash: user.passwordHash })
      .onConflictDoNothing({ target: users.email })
      .returning();
    if (!row) throw conflict(`A user with email '${user.email}' already exists.`, "email");
    await tx.insert(memberships).values({ userId: row.id, teamId: input.teamId, role: input.role ?? "member" });
    return row;
  });
}

/** Creates a user and makes them a member of `teamId` (owner when `role` says so). */
export async function createUser(
  db: DbOrTx,
  input: { email: string; password: string; name?: string; teamId: string; role?: "owner" | "member" },
): Promise<User> {
  return insertUser(db, await prepareUser(input), input);
}

/**
 * The user when the email and password match, otherwise null (same answer, and about the same
 * time, for both failures). A hash made with weaker parameters is upgraded after a success.
 */
export async function authenticateUser(db: DbOrTx, email: string, password: string): Promise<User | null> {
  const [user] = await db.select().from(users).where(eq(users.email, email.trim().toLowerCase()));
  if (!user) return verifyNothing(password).then(() => null);
  if (!(await verifyPassword(password, user.passwordHash))) return null;
  if (needsRehash(user.passwordHash)) {
    void hashPassword(password)
      .then((passwordHash) => db.update(users).set({ passwordHash }).where(eq(users.id, user.id)))
      .catch((err: unknown) => logger().error({ err }, "password rehash failed"));
  }
  return user;
}

/** Lower-case letters, digits and inner hyphens, at most 30 characters (room for a suffix). */
export function slugify(text: string): string {
  const slug = text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "") // accents, split off by NFKD
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 30)
    .replace(/-+$/, "");
  return slug || "team";
}

/**
 * Sign-up: a new user who owns a new team, in one transaction. The team slug comes from the
 * team name (or the email's local part); a taken slug gets a random suffix.
 */
export async function signUp(
  db: DbOrTx,
  input: SignUpInput & { invite?: string },
): Promise<{ user: User; team: Team }> {
  const parsed = SignUpInput.safeParse(input);
  if (!parsed.success) throw fromZodError(parsed.error);
  const { email, password, name, teamName } = parsed.data;
  const base = slugify(teamName || email.split("@")[0]!);
  const prepared = await prepareUser({ email, password, name }); // hashed before the transaction
  if (input.invite !== undefined) {
    // Through an invite link: the user joins its team with its role, and has no team of their own.
    const token = input.invite;
    return db.transaction(async (tx) => {
      const { team, role } = await takeInvite(tx, token).catch((err: unknown) => {
        throw err instanceof ApiError && err.status === 404 ? notFound(err.message, "invite") : err;
      });
      return { user: await insertUser(tx, prepared, { teamId: team.id, role }), team };
    });
  }
  return db.transaction(async (tx) => {
    let team: Team | undefined;
    for (let attempt = 0; !team; attempt++) {
      const slug = attempt === 0 ? base : `${base}-${randomToken(attempt < 3 ? 4 : 8)}`;
      try {
        team = await createTeam(tx, { slug, name: teamName || name || slug });
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 409) || attempt >= 5) throw err;
      }
    }
    const user = await insertUser(tx, prepared, { teamId: team.id, role: "owner" });
    return { user, team };
  });
}

/** The user with this email (any case), or a 404 naming `email`. */
export async function userByEmail(db: DbOrTx, email: string): Promise<User> {
  const [row] = await db.select().from(users).where(eq(users.email, email.trim().toLowerCase()));
  if (!row) throw notFound(`No user with email '${email}'.`, "email");
  return row;
}

/** Whether the team has an owner (one made with the CLI's team:create has none until a user is added). */
export async function hasOwner(db: DbOrTx, teamId: string): Promise<boolean> {
  const [row] = await db
    .select({ userId: memberships.userId })
    .from(memberships)
    .where(and(eq(memberships.teamId, teamId), eq(memberships.role, "owner")))
    .limit(1);
  return row !== undefined;
}

/** Sets a user's password (the operator's recovery: there is no reset by email). */
export async function setUserPassword(db: DbOrTx, input: { email: string; password: string }): Promise<User> {
  const user = await userByEmail(db, input.email);
  const prepared = await prepareUser({ email: user.email, password: input.password });
  const [row] = await db
    .update(users)
    // Every session the old password opened ends (lib/auth/session.ts getSessionUser).
    .set({ passwordHash: prepared.passwordHash, sessionVersion: sql`${users.sessionVersion} + 1` })
    .where(eq(users.id, user.id))
    .returning();
  return row!;
}
