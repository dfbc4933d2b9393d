import { readFileSync } from "node:fs";
import { expect, test } from "@playwright/test";
import { createKey, createPipeline, hostedApi, shot, signUp, uniqueEmail } from "./pages";

// selection → create dataset → watch it become READY (no reload) → download → delete
test("a selection becomes a dataset that is packaged, downloaded and deleted", async ({ page, request }) => {
  await signUp(page, { email: uniqueEmail("data"), teamName: "Data team" });
  const pipelineId = await createPipeline(page, "feedback");
  const { secret } = await createKey(page, "ingest");
  const api = hostedApi(request, secret);
  for (let i = 0; i < 12; i++) {
    const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
      messages: [
        { role: "user", content: `q${i}` },
        { role: "assistant", content: `a${i}` },
      ],
      metadata: { lang: i % 4 === 0 ? "de" : "en" },
    });
    expect(res.status()).toBe(200);
  }

  // A shared link the API refuses (a sample past the limit): the dialog says why, not nothing.
  await page.goto(`/pipelines/${pipelineId}?sampleSize=2000000`);
  await page.getByRole("button", { name: "Create dataset" }).click();
  const refused = page.getByTestId("create-dataset-dialog");
  await refused.getByLabel("Name").fill("too-many");
  await refused.getByRole("button", { name: "Create dataset" }).click();
  await expect(refused.getByRole("alert")).toContainText("The selection cannot be packaged: sample");
  await page.keyboard.press("Escape");
  await expect(refused).toBeHidden();

  await page.goto(`/pipelines/${pipelineId}?meta.lang=de`);
  await expect(page.getByTestId("selection-count")).toHaveText("3");
  await page.getByRole("button", { name: "Create dataset" }).click();
  const dialog = page.getByTestId("create-dataset-dialog");
  await expect(dialog.getByTestId("dataset-summary")).toContainText("3 samples");
  await expect(dialog.getByTestId("dataset-summary")).toContainText("lang = de");
  // The API's name rule, checked before sending.
  await dialog.getByLabel("Name").fill("Not Valid!");
  await dialog.getByRole("button", { name: "Create dataset" }).click();
  await expect(dialog.getByText(/lower-case letters/).first()).toBeVisible();
  await dialog.getByLabel("Name").fill("german-feedback");
  await shot(page, "13-create-dataset");
  await dialog.getByRole("button", { name: "Create dataset" }).click();

  // The Datasets page follows the packaging by itself.
  await expect(page).toHaveURL(/\/datasets$/);
  const row = page.getByRole("row", { name: /german-feedback/ });
  await expect(row).toContainText("data-team/german-feedback");
  await expect(row.getByTestId("dataset-status")).toHaveText("READY", { timeout: 30_000 });
  await expect(row).toContainText("3");
  await shot(page, "14-datasets");

  const [download, signed] = await Promise.all([
    page.waitForEvent("download"),
    page.waitForResponse((r) => /\/api\/ui\/datasets\/[^/]+\/download/.test(r.url())),
    row.getByRole("button", { name: "Download german-feedback" }).click(),
  ]);
  // The app's own signed URL comes as a path: fetched from the host the dashboard is open on,
  // whatever PUBLIC_URL's host (localhost by default) is.
  expect((await signed.json()).url).toMatch(/^\/v1\/blobs\//);
  const lines = readFileSync((await download.path())!, "utf8")
    .trim()
    .split("\n");
  expect(lines).toHaveLength(3);
  expect(lines.map((l) => JSON.stringify(JSON.parse(l))).join("\n")).toMatch(/q0[\s\S]*q4[\s\S]*q8/);

  await row.getByRole("button", { name: "Delete german-feedback" }).click();
  const confirm = page.getByTestId("delete-dataset-dialog");
  await confirm.getByRole("button", { name: "Delete dataset" }).click();
  await expect(page.getByText("No datasets yet")).toBeVisible();
});
