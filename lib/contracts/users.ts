import { z } from "zod";
import { storable } from "./text";

/**
 * Users and sign-up, shared by the services, the CLI and the dashboard's forms (this file is
 * imported by client components, so it must stay free of server-only modules).
 */
export const UserInput = z.object({
  email: z.email("must be an email address").transform((e) => e.toLowerCase()),
  password: z.string().min(8, "must be at least 8 characters").max(200),
  name: storable(z.string().trim().max(200)).optional(),
});

/** Dashboard sign-up: the user fields plus an optional team name (default: from the email). */
export const SignUpInput = UserInput.extend({
  teamName: storable(z.string().trim().max(100)).optional(),
});
export type SignUpInput = z.input<typeof SignUpInput>;

/**
 * The sign-up request body: unknown fields are refused, as everywhere in the API. With `invite`
 * (an invite link's token) the new user joins that team, with the invite's role, instead of
 * getting a team of their own.
 */
export const SignUpBody = z.strictObject({ ...SignUpInput.shape, invite: z.string().min(1).max(200).optional() });
