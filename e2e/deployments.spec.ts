import { expect, test } from "@playwright/test";
import { shot, signUp, uniqueEmail } from "./pages";

// An owner deploys a hub model from the dashboard, watches it become ready, and deletes it;
// a model the hub does not have shows as failed, with the reason.
test("an owner deploys a hub model, sees its state, and deletes it", async ({ page }) => {
  await signUp(page, { email: uniqueEmail("deploy") });
  await page.goto("/deployments");
  await expect(page.getByText("No deployments yet")).toBeVisible();

  const deploy = async (name: string, model: string, dtype: string) => {
    await page.getByRole("button", { name: "Deploy a model" }).click();
    const dialog = page.getByTestId("create-deployment-dialog");
    await dialog.getByLabel("Name").fill(name);
    await dialog.getByLabel("Model").fill(model);
    await dialog.getByLabel("Weights").selectOption(dtype);
    await dialog.getByRole("button", { name: "Deploy" }).click();
    await expect(dialog).toBeHidden();
  };

  // A bad name is caught in the form, before any request.
  await page.getByRole("button", { name: "Deploy a model" }).click();
  const dialog = page.getByTestId("create-deployment-dialog");
  await dialog.getByLabel("Name").fill("Not A Name");
  await dialog.getByLabel("Model").fill("e2e/tiny");
  await dialog.getByRole("button", { name: "Deploy" }).click();
  await expect(dialog).toContainText("lower-case letters");
  await dialog.getByRole("button", { name: "Cancel" }).click();

  await deploy("hubby", "e2e/tiny", "fp32");
  const row = page.locator('tr[data-deployment="hubby"]');
  await expect(row).toContainText("e2e/tiny");
  await expect(row).toContainText("fp32");
  // The page polls while it settles: pending → (downloading) → ready, without a reload.
  await expect(row.getByTestId("deployment-state")).toHaveAttribute("data-state", "ready", { timeout: 30_000 });
  await shot(page, "19-deployment-ready");

  await deploy("missing", "e2e/not-there", "auto");
  const failed = page.locator('tr[data-deployment="missing"]');
  await expect(failed.getByTestId("deployment-state")).toHaveAttribute("data-state", "failed", { timeout: 30_000 });
  await expect(failed).toContainText("e2e/not-there");
  await shot(page, "20-deployment-failed");

  await row.getByRole("button", { name: "Delete hubby" }).click();
  const confirm = page.getByTestId("delete-deployment-dialog");
  await expect(confirm).toContainText("stops answering");
  await confirm.getByRole("button", { name: "Delete deployment" }).click();
  await expect(row).toHaveCount(0);
  await expect(failed).toHaveCount(1);
});

// An owner puts an OpenAI-compatible server behind a deployment; its key is never shown.
test("an owner creates an upstream deployment; the table says so and the key stays hidden", async ({ page }) => {
  await signUp(page, { email: uniqueEmail("upstream") });
  await page.goto("/deployments");
  await page.getByRole("button", { name: "Deploy a model" }).click();
  const dialog = page.getByTestId("create-deployment-dialog");
  await dialog.getByLabel("Name").fill("fleet");
  await dialog.getByLabel("Served by").selectOption("upstream");
  await expect(dialog.getByLabel("Weights")).toHaveCount(0);
  await dialog.getByLabel("Server URLs").fill("http://127.0.0.1:9/v1, http://127.0.0.1:10");
  await dialog.getByLabel("Server kind").selectOption("vllm");
  await dialog.getByLabel("Model name on the servers").fill("meta-llama/Llama-3.1-8B-Instruct");
  await dialog.getByLabel("API key of the servers (optional)").fill("sk-e2e-secret-upstream-key");
  await dialog.getByRole("button", { name: "Deploy" }).click();
  await expect(dialog).toBeHidden();
  const row = page.locator('tr[data-deployment="fleet"]');
  await expect(row).toContainText("meta-llama/Llama-3.1-8B-Instruct");
  await expect(row).toContainText("upstream vllm · 2 URLs");
  await expect(row.getByTestId("deployment-state")).toHaveAttribute("data-state", "ready");
  await expect(page.locator("body")).not.toContainText("sk-e2e-secret-upstream-key");
  await shot(page, "21-deployment-upstream");
});
