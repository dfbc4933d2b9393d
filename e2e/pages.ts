import { expect, type APIRequestContext, type Page } from "@playwright/test";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import { connect } from "../lib/db/client";
import { memberships, users } from "../lib/db/schema";
import { createDeployment } from "../lib/services/deployments";

/** Page objects and helpers shared by the specs (one world per test: a fresh user and team). */

const SHOTS = path.resolve(import.meta.dirname, "../test-results/screenshots");

/** A full-page screenshot for reviewers, under test-results/screenshots/<name>.png. */
export async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

export function uniqueEmail(prefix = "user"): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.com`;
}

export const PASSWORD = "correct horse battery";

export async function signUp(page: Page, input: { email: string; name?: string; teamName?: string }) {
  await page.goto("/sign-up");
  if (input.name) await page.getByLabel("Your name").fill(input.name);
  await page.getByLabel("Email").fill(input.email);
  await page.getByLabel("Password").fill(PASSWORD);
  if (input.teamName) await page.getByLabel("Team name").fill(input.teamName);
  await page.getByRole("button", { name: "Create account" }).click();
  await expect(page).toHaveURL(/\/pipelines$/);
}

export async function signIn(page: Page, email: string, password: string) {
  await page.goto("/sign-in");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Creates a pipeline through the dialog; returns its id (the page navigates to it). */
export async function createPipeline(page: Page, name: string): Promise<string> {
  await page.goto("/pipelines");
  await page
    .getByRole("button", { name: /pipeline/i })
    .first()
    .click();
  const dialog = page.getByTestId("create-pipeline-dialog");
  await dialog.getByLabel("Name").fill(name);
  await dialog.getByRole("button", { name: "Create pipeline" }).click();
  await expect(page).toHaveURL(/\/pipelines\/pipe_[a-z0-9]+$/);
  return page.url().split("/").pop()!;
}

/** Creates a key on the settings page and returns its secret (shown once). */
export async function createKey(page: Page, label: string, kind: "API key" | "Model key" = "API key") {
  await page.goto("/settings/keys");
  await page.getByRole("button", { name: "Create key" }).click();
  const dialog = page.getByTestId("create-key-dialog");
  await dialog.getByLabel("Label").fill(label);
  await dialog.getByLabel(kind).check();
  await dialog.getByRole("button", { name: "Create key" }).click();
  const secret = (await dialog.getByTestId("new-key-secret").textContent())!.trim();
  return { dialog, secret };
}

/** The hosted API, called the way an application would (no browser session). */
export function hostedApi(request: APIRequestContext, key: string) {
  const headers = { authorization: `Bearer ${key}` };
  return {
    get: (p: string) => request.get(p, { headers }),
    post: (p: string, data: unknown) => request.post(p, { headers, data }),
  };
}

/** A deployment of the tiny test model in the team of the user `email` (the dashboard has no form for it). */
export async function createDeploymentFor(email: string, name: string): Promise<void> {
  const handle = connect(process.env.E2E_DATABASE_URL!, { max: 1 });
  try {
    const [m] = await handle.db
      .select({ teamId: memberships.teamId })
      .from(memberships)
      .innerJoin(users, eq(users.id, memberships.userId))
      .where(eq(users.email, email.toLowerCase()));
    await createDeployment(handle.db, { teamId: m!.teamId, name, model: process.env.E2E_TINY_MODEL! });
  } finally {
    await handle.close();
  }
}
