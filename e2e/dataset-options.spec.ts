import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { expect, test } from "@playwright/test";
import { createDeploymentFor, createKey, createPipeline, hostedApi, shot, signUp, uniqueEmail } from "./pages";

// The new filters in the filter bar, the create-dataset dialog's options, and the dataset page's
// stats and token histogram.
test("operators, search, dates and sampling narrow the selection; a dataset with options shows its stats", async ({
  page,
  request,
}) => {
  const email = uniqueEmail("options");
  await signUp(page, { email, teamName: "Options team" });
  await createDeploymentFor(email, "counter");
  const pipelineId = await createPipeline(page, "tickets");
  const { secret } = await createKey(page, "ingest");
  await page.getByRole("button", { name: "Done" }).click();
  const api = hostedApi(request, secret);
  // 24 samples: lang en / fr / (none) in turn; every 8th mentions a zebra; #20–23 repeat #0–3.
  const langs = ["en", "fr", undefined];
  for (let i = 0; i < 24; i++) {
    const k = i >= 20 ? i - 20 : i;
    const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
      messages: [
        { role: "user", content: `Question ${k}${k % 8 === 0 ? " about a zebra" : ""}` },
        { role: "assistant", content: `Answer ${k} `.repeat(1 + (k % 5)) },
      ],
      ...(langs[i % 3] ? { metadata: { lang: langs[i % 3] } } : {}),
    });
    expect(res.status()).toBe(200);
  }

  await page.goto(`/pipelines/${pipelineId}`);
  const count = page.getByTestId("selection-count");
  await expect(count).toHaveText("24");

  // lang ≠ en: the French ones and those without the key (16 of 24).
  await page.getByLabel("Metadata key").fill("lang");
  await page.getByLabel("Operator").selectOption({ label: "≠" });
  await page.getByLabel("Value").fill("en");
  await page.getByRole("button", { name: "Add filter" }).click();
  await expect(count).toHaveText("16");
  await expect(page).toHaveURL(/ne\.lang=en/);
  await expect(page.getByTestId("filter-chip")).toHaveText(/lang ≠ en/);

  // Search: "zebra" is in #0, #8, #16 and #20 (a repeat of #0); lang ≠ en keeps #8, #16 and #20.
  await page.getByLabel("Search messages").fill("ZEBRA");
  await page.getByLabel("Search messages").press("Enter");
  await expect(count).toHaveText("3");
  await expect(page).toHaveURL(/search=ZEBRA/);
  const rows = page.getByTestId("samples-table").locator("tbody tr");
  await expect(rows).toHaveCount(3);
  await shot(page, "16-selection-operators-search");

  // Dates: nothing was created after tomorrow; everything before it.
  await page.getByRole("button", { name: "Clear filters" }).click();
  await expect(count).toHaveText("24");
  const tomorrow = new Date(Date.now() + 86_400_000);
  const local = new Date(tomorrow.getTime() - tomorrow.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  await page.getByLabel("Created after").fill(local);
  await page.getByLabel("Created after").press("Enter");
  await expect(count).toHaveText("0");
  await expect(page).toHaveURL(/createdAfter=/);
  await page.getByLabel("Created after").fill("");
  await page.getByLabel("Created after").press("Enter");
  await page.getByLabel("Created before").fill(local);
  await page.getByLabel("Created before").press("Enter");
  await expect(count).toHaveText("24");

  // A random sample of 5, the same after a reload.
  await page.getByLabel("Random sample of").fill("5");
  await page.getByLabel("Random sample of").press("Enter");
  await expect(count).toHaveText("5");
  await expect(rows).toHaveCount(5);
  const picked = await rows.allTextContents();
  await page.reload();
  await expect(rows).toHaveCount(5);
  expect(await rows.allTextContents()).toEqual(picked);
  await page.getByRole("button", { name: "Clear filters" }).click();
  await expect(count).toHaveText("24");

  // Create a dataset with every option but Parquet: 4 repeats out, tokens counted, 20% validation.
  await page.getByRole("button", { name: "Create dataset" }).click();
  const dialog = page.getByTestId("create-dataset-dialog");
  await dialog.getByLabel("Name").fill("tickets-sft");
  await dialog.getByLabel("Compression").selectOption("gzip");
  await dialog.getByLabel("Remove duplicates").check();
  await dialog.getByLabel("Validate for OpenAI chat fine-tuning").check();
  await dialog.getByLabel("Split off a validation set").check();
  await dialog.getByLabel("Validation share (%)").fill("20");
  await dialog.getByLabel("Split seed").fill("3");
  await dialog.getByLabel("Count tokens with").selectOption("counter");
  await dialog.getByLabel("Max tokens").fill("1000");
  await shot(page, "17-create-dataset-options");
  await dialog.getByRole("button", { name: "Create dataset" }).click();

  await expect(page).toHaveURL(/\/datasets$/);
  await page.getByRole("link", { name: "tickets-sft" }).click();
  await expect(page).toHaveURL(/\/datasets\/data_[a-z0-9]+$/);
  await expect(page.getByTestId("dataset-status")).toHaveText("READY", { timeout: 30_000 });
  await expect(page.getByTestId("stat-included")).toHaveText("20");
  await expect(page.getByTestId("stat-duplicates")).toHaveText("4");
  await expect(page.getByTestId("stat-invalid")).toHaveText("0");
  const histogram = page.getByTestId("token-histogram");
  await expect(histogram.locator(".recharts-bar-rectangle").first()).toBeVisible();
  expect(await histogram.locator(".recharts-bar-rectangle").count()).toBeGreaterThan(1);
  await histogram.scrollIntoViewIfNeeded();
  await shot(page, "18-dataset-histogram");

  // The train file downloads from the page and holds what the stats say.
  const split = (await page.getByTestId("stat-train-validation").textContent())!
    .split("/")
    .map((x) => Number(x.trim()));
  expect(split[0]! + split[1]!).toBe(20);
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download tickets-sft-train.jsonl.gz" }).click(),
  ]);
  const lines = gunzipSync(readFileSync((await download.path())!))
    .toString()
    .trim()
    .split("\n");
  expect(lines).toHaveLength(split[0]!);
  for (const line of lines) expect(JSON.parse(line).messages).toHaveLength(2);
});
