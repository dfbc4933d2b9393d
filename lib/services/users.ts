import { eq } from "drizzle-orm";
import { z } from "zod";
import type { DbOrTx } from "../db/client";
import { memberships, users, type User } from "../db/schema";
import { conflict, fromZodError } from "../errors";
import { hashPassword, verifyPassword } from "../auth/password";
import { newId } from "../ids";

export const UserInput = z.object({
  email: z.email("must be an email address").transform((e) => e.toLowerCase()),
  password: z.string().min(8, "must be at least 8 characters").max(200),
  name: z.string().trim().max(200).optional(),
});

/** Creates a user and makes them a member of `teamId` (owner when `role` says so). */
export async function createUser(
  db: DbOrTx,
  input: { email: string; password: string; name?: string; teamId: string; role?: "owner" | "member" },
): Promise<User> {
  const parsed = UserInput.safeParse(input);
  if (!parsed.success) throw fromZodError(parsed.error);
  const passwordHash = await hashPassword(parsed.data.password);
  return db.transaction(async (tx) => {
    const [user] = await tx
      .insert(users)
      .values({ id: newId("user"), email: parsed.data.email, name: parsed.data.name || null, passwordHash })
      .onConflictDoNothing({ target: users.email })
      .returning();
    if (!user) throw conflict(`A user with email '${parsed.data.email}' already exists.`, "email");
    await tx.insert(memberships).values({ userId: user.id, teamId: input.teamId, role: input.role ?? "member" });
    return user;
  });
}

/** The user when the email and password match, otherwise null (same answer for both failures). */
export async function authenticateUser(db: DbOrTx, email: string, password: string): Promise<User | null> {
  const [user] = await db.select().from(users).where(eq(users.email, email.trim().toLowerCase()));
  if (!user) return null;
  return (await verifyPassword(password, user.passwordHash)) ? user : null;
}
