import { expect, test } from "@playwright/test";
import { createDeploymentFor, createPipeline, shot, signUp, uniqueEmail } from "./pages";

// Playground "save to pipeline" → the pipeline holds the completion, whose preview shows how it was generated.
test("the playground saves a completion to a pipeline; the preview shows its generation facts", async ({ page }) => {
  // A team of its own: the demo team's pipeline list stays as the other specs expect it.
  const email = uniqueEmail("capture");
  await signUp(page, { email, teamName: "Capture team" });
  await createDeploymentFor(email, "harbour");
  const name = `captured-${Date.now().toString(36)}`;
  const pipelineId = await createPipeline(page, name);

  await page.goto("/playground?deployment=harbour");
  await page.getByLabel("Save to pipeline").selectOption({ label: name });
  await page.getByLabel("Max tokens").fill("8");
  await page.getByLabel("Seed").fill("7");
  await page.getByLabel("Prompt").fill("The harbour at dawn");
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByTestId("completion-meta")).toContainText(`saved to ${name}`, { timeout: 30_000 });
  const completion = await page.getByTestId("token-stream").textContent();
  await shot(page, "25-playground-save-to-pipeline");

  await page.goto(`/pipelines/${pipelineId}`);
  const rows = page.getByTestId("samples-table").locator("tbody tr");
  await expect(rows).toHaveCount(1);
  const panel = page.getByTestId("sample-panel");
  // The rows come in the server's HTML, before the page hydrates: a click that early opens
  // nothing (CI saw it once, this spec running first on a cold app). Click until the panel opens.
  await expect(async () => {
    await rows.first().click();
    await expect(panel).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 20_000 });
  await expect(panel.locator('[data-role="user"]')).toContainText("The harbour at dawn");
  await expect(panel.locator('[data-role="assistant"]')).toContainText(completion!.trim());
  const facts = panel.getByTestId("sample-generation");
  await expect(facts).toContainText("/harbour");
  await expect(facts).toContainText(/finish reason\s*(stop|length)/);
  await expect(facts).toContainText(/tokens\s*\d+ prompt · \d+ completion/);
  await shot(page, "26-captured-sample-panel");
});
