import { z } from "zod";

export const TeamRole = z.enum(["owner", "member"], { error: "must be 'owner' or 'member'" });
export type TeamRole = z.infer<typeof TeamRole>;

/** Changing a member's role (owners only). */
export const SetRoleBody = z.strictObject({ role: TeamRole });

/** Creating an invite link (owners only): the role the person who uses it gets. */
export const CreateInviteBody = z.strictObject({ role: TeamRole.default("member") });

/** Using an invite link: the token is the link's last path segment. */
export const AcceptInviteBody = z.strictObject({ token: z.string().min(1).max(200) });

export type MemberDto = {
  userId: string;
  email: string;
  name: string | null;
  role: TeamRole;
  joinedAt: string;
  /** The team's keys they made on the dashboard that are still valid. */
  keys: number;
  /** The signed-in user. */
  you: boolean;
};

export type InviteDto = {
  id: string;
  role: TeamRole;
  createdBy: string | null;
  createdAt: string;
  expiresAt: string;
};
