import { expect, test, type Page } from "@playwright/test";
import { createKey, createPipeline, hostedApi, shot, signUp, uniqueEmail } from "./pages";

// A JSONL file uploaded from the pipeline page: upload and import progress, refusals, the new
// samples on the page; a tool-calling sample in the panel; the API reference page.
test("imports a JSONL file with live progress and shows its samples", async ({ page }) => {
  await signUp(page, { email: uniqueEmail("import"), teamName: "Import team" });
  const pipelineId = await createPipeline(page, "imported");
  const lines = Array.from({ length: 3000 }, (_, i) =>
    i === 41
      ? '{"messages": "not a list"}'
      : JSON.stringify({ messages: [{ role: "user", content: `imported ${i}` }], metadata: { n: String(i) } }),
  );
  await page.goto(`/pipelines/${pipelineId}`);
  await page.getByTestId("import-button").click();
  const dialog = page.getByTestId("import-dialog");
  await dialog.getByLabel("JSONL file").setInputFiles({
    name: "samples.jsonl",
    mimeType: "application/x-ndjson",
    buffer: Buffer.from(lines.join("\n") + "\n"),
  });
  await dialog.getByRole("button", { name: "Import" }).click();
  await expect(dialog.getByTestId("import-status")).toHaveText("READY", { timeout: 30_000 });
  await expect(dialog.getByTestId("import-progress")).toContainText("3,000 lines read");
  await expect(dialog.getByTestId("import-progress")).toContainText("2,999 imported");
  await expect(dialog.getByTestId("import-progress")).toContainText("line 42: messages");
  await shot(page, "30-import");
  await dialog.getByRole("button", { name: "Close" }).click();
  await page.reload();
  await expect(page.getByTestId("selection-count")).toHaveText("2,999");
});

test("stops a running import, and shows what it stored", async ({ page, request }) => {
  await signUp(page, { email: uniqueEmail("stopimport"), teamName: "Stop import team" });
  const pipelineId = await createPipeline(page, "stopped");
  const { secret } = await createKey(page, "ingest");
  const added = await hostedApi(request, secret).post(`/v1/pipelines/${pipelineId}/add`, {
    messages: [{ role: "user", content: "added by the API" }],
  });
  expect(added.status()).toBe(200);
  const dialog = await uploadMany(page, pipelineId, 300_000, "stopped");
  const importedNow = async () =>
    Number(
      (await dialog.getByTestId("import-progress").textContent())
        ?.match(/([\d,]+) imported/)?.[1]
        ?.replaceAll(",", "") ?? 0,
    );
  await expect(dialog.getByTestId("import-status")).toHaveText("PROCESSING", { timeout: 30_000 });
  // A reload loses the page's state: the button finds the import still running, and follows it.
  await page.reload();
  await expect(page.getByTestId("import-button")).toHaveText("Importing…");
  await page.getByTestId("import-button").click();
  // Stopped once some of it is stored.
  await expect.poll(importedNow, { timeout: 30_000, intervals: [100] }).toBeGreaterThan(0);
  await dialog.getByTestId("import-stop").click();
  await expect(dialog.getByTestId("import-status")).toHaveText("CANCELLED");
  const imported = await importedNow();
  expect(imported).toBeLessThan(300_000);
  // Its samples, and only those (the pipeline's one added sample is left out).
  await dialog.getByRole("link", { name: "Show its samples" }).click();
  await expect(page).toHaveURL(/importId=imp_/);
  await expect(page.getByTestId("filter-chip")).toContainText("import = imp_");
  await expect(page.getByTestId("selection-count")).toHaveText(imported.toLocaleString("en-US"));
  await page.getByRole("button", { name: /Remove filter import/ }).click();
  await expect(page.getByTestId("selection-count")).toHaveText((imported + 1).toLocaleString("en-US"));
});

test("an import left running in the background updates the page when it ends", async ({ page }) => {
  await signUp(page, { email: uniqueEmail("bgimport"), teamName: "Background import team" });
  const pipelineId = await createPipeline(page, "background");
  const dialog = await uploadMany(page, pipelineId, 100_000, "background");
  await expect(dialog.getByTestId("import-status")).toHaveText("PROCESSING", { timeout: 30_000 });
  // Closing does not cancel it: the worker goes on, the button says so and reopens the progress.
  await dialog.getByRole("button", { name: "Run in background" }).click();
  await expect(dialog).toBeHidden();
  await expect(page.getByTestId("import-button")).toHaveText("Importing…");
  // When it ends, the page shows the new samples without a reload.
  await expect(page.getByTestId("selection-count")).toHaveText("100,000", { timeout: 60_000 });
  await expect(page.getByTestId("import-button")).toHaveText("Import JSONL");
});

test("shows tool calls in the sample panel, and the API reference", async ({ page, request }) => {
  await signUp(page, { email: uniqueEmail("tools"), teamName: "Tools team" });
  const pipelineId = await createPipeline(page, "tools");
  const { secret } = await createKey(page, "ingest");
  const res = await hostedApi(request, secret).post(`/v1/pipelines/${pipelineId}/add`, {
    messages: [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_7", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_7", content: "-3" },
      { role: "assistant", content: "It is -3." },
    ],
  });
  expect(res.status()).toBe(200);
  await page.goto(`/pipelines/${pipelineId}?sample=${(await res.json()).id}`);
  const panel = page.getByTestId("sample-panel");
  await expect(panel.getByTestId("tool-call")).toContainText('get_weather({"city":"Oslo"}) · call_7');
  await expect(panel.locator('[data-role="tool"]')).toContainText("call_7");

  await page.getByRole("link", { name: "API reference" }).click();
  await expect(page).toHaveURL(/\/api-reference$/);
  const add = page.getByTestId("api-operation").filter({ hasText: "/v1/pipelines/{id}/add-batch" });
  await add.locator("summary").click();
  await expect(add).toContainText("Idempotency-Key");
  await expect(add).toContainText("samples");
  await shot(page, "31-api-reference");
});

/** Uploads `n` lines of about 120 characters from the pipeline page's import dialog; the dialog. */
async function uploadMany(page: Page, pipelineId: string, n: number, word: string) {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({ messages: [{ role: "user", content: `${word} ${i} `.padEnd(120, "x") }] }),
  );
  await page.goto(`/pipelines/${pipelineId}`);
  const dialog = page.getByTestId("import-dialog");
  // A click before the page has hydrated opens nothing: click until the dialog is there.
  await expect(async () => {
    if (!(await dialog.isVisible())) await page.getByTestId("import-button").click({ timeout: 2_000 });
    await expect(dialog).toBeVisible({ timeout: 2_000 });
  }).toPass({ timeout: 30_000 });
  await dialog.getByLabel("JSONL file").setInputFiles({
    name: "many.jsonl",
    mimeType: "application/x-ndjson",
    buffer: Buffer.from(lines.join("\n") + "\n"),
  });
  await dialog.getByRole("button", { name: "Import" }).click();
  return dialog;
}
