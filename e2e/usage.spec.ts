import { expect, test } from "@playwright/test";
import { createDeploymentFor, createKey, shot, signUp, uniqueEmail } from "./pages";

// Completions made with the team's keys show on the usage page as charts (Recharts SVG).
test("the usage page charts a team's completions over time, by deployment and by key", async ({ page, request }) => {
  const email = uniqueEmail("usage");
  await signUp(page, { email });
  await page.goto("/usage");
  await expect(page.getByText("No completions in this period")).toBeVisible();

  await createDeploymentFor(email, "charted");
  await page.goto("/settings/keys");
  const { dialog, secret } = await createKey(page, "usage key", "Model key");
  await dialog.getByRole("button", { name: "Done" }).click();
  const team = new URL(page.url()).origin; // same origin; the team slug comes from the deployments page
  await page.goto("/deployments");
  const url = await page.locator('tr[data-deployment="charted"] code').first().innerText();
  expect(url.startsWith(team)).toBe(true);
  for (let i = 0; i < 3; i++) {
    const res = await request.post(url, {
      headers: { authorization: `Bearer ${secret}` },
      data: { prompt: `Once upon a time ${i}`, max_tokens: 5, stream: i === 2 },
    });
    expect(res.status()).toBe(200);
  }

  await page.goto("/usage");
  await expect(page.getByTestId("usage-totals")).toContainText("3 requests", { timeout: 15_000 });
  for (const chart of ["usage-tokens-chart", "usage-requests-chart", "usage-deployments-chart", "usage-keys-chart"]) {
    await expect(page.getByTestId(chart).locator("svg.recharts-surface").first()).toBeVisible();
  }
  await expect(page.getByTestId("usage-keys-chart")).toContainText("usage key");
  await expect(page.getByTestId("usage-deployments-chart")).toContainText("charted");
  await page.getByRole("button", { name: "Last 7 days" }).click();
  await expect(page.getByTestId("usage-totals")).toContainText("3 requests");
  // The period is in the URL: a reload keeps it.
  await expect(page).toHaveURL(/\?days=7$/);
  await page.reload();
  await expect(page.getByRole("button", { name: "Last 7 days" })).toHaveAttribute("aria-pressed", "true");
  await shot(page, "21-usage");
});
