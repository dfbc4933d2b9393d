import { expect, test } from "@playwright/test";
import { shot, signIn } from "./pages";

const email = () => process.env.E2E_DEMO_EMAIL!;
const password = () => process.env.E2E_DEMO_PASSWORD!;

// The demo user that `npm start` prints can sign in; a member of two teams switches between them.
test("the demo user signs in and switches teams; each team sees only its own pipelines", async ({ page }) => {
  await signIn(page, email(), "wrong password");
  await expect(page.getByRole("form", { name: "Sign in" }).getByRole("alert")).toHaveText("Wrong email or password.");
  await expect(page).toHaveURL(/\/sign-in/);

  await signIn(page, email(), password());
  await expect(page).toHaveURL(/\/pipelines$/);
  await expect(page.getByTestId("user-email")).toHaveText(email());

  const switcher = page.getByLabel("Team");
  await expect(switcher).toHaveValue(/^team_/);
  await expect(switcher.locator("option")).toHaveText(["Demo team", "Research lab"]);

  // A pipeline made in the research team is not visible from the demo team.
  await switcher.selectOption({ label: "Research lab" });
  await expect(switcher.locator("option:checked")).toHaveText("Research lab");
  await page
    .getByRole("button", { name: /pipeline/i })
    .first()
    .click();
  await page.getByTestId("create-pipeline-dialog").getByLabel("Name").fill("research-only");
  await page.getByRole("button", { name: "Create pipeline" }).click();
  await expect(page.getByRole("heading", { name: "research-only" })).toBeVisible();
  const researchPipeline = page.url();
  await page.goto("/pipelines");
  await expect(page.getByRole("link", { name: "research-only" })).toBeVisible();
  await shot(page, "12-team-switcher");

  await page.getByLabel("Team").selectOption({ label: "Demo team" });
  await expect(page.getByLabel("Team").locator("option:checked")).toHaveText("Demo team");
  await expect(page.getByText("No pipelines yet")).toBeVisible();
  await expect(page.getByRole("link", { name: "research-only" })).toHaveCount(0);
  // Nor can the demo team open it by URL.
  await page.goto(researchPipeline);
  await expect(page.getByRole("heading", { name: "Pipeline not found" })).toBeVisible();
});
