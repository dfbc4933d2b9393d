import { expect, test } from "@playwright/test";
import { shot, signIn } from "./pages";

// Deployments list → playground: the completion streams in through the GET event stream, with logprobs per token.
test("the playground streams a completion with its logprobs", async ({ page }) => {
  await signIn(page, process.env.E2E_DEMO_EMAIL!, process.env.E2E_DEMO_PASSWORD!);
  await expect(page).toHaveURL(/\/pipelines$/);
  await page.getByRole("link", { name: "Deployments" }).click();
  const row = page.getByRole("row", { name: /demo/ });
  await expect(row).toContainText("/deployments/demo/demo");
  await shot(page, "15-deployments");
  await row.getByRole("link", { name: "Playground" }).click();
  await expect(page).toHaveURL(/\/playground\?deployment=demo$/);

  // Client-side validation with the endpoint's schema.
  await page.getByLabel("Max tokens").fill("5000");
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByText(/2048/)).toBeVisible();

  await page.getByLabel("Max tokens").fill("12");
  await page.getByLabel("Seed").fill("42");
  await page.getByLabel("Prompt").fill("The river");
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByTestId("completion-meta")).toContainText(/finish: (length|stop)/, { timeout: 30_000 });
  const tokens = page.getByTestId("token");
  const count = await tokens.count();
  expect(count).toBeGreaterThan(0);
  expect(count).toBeLessThanOrEqual(12);
  await expect(page.getByTestId("completion-meta")).toContainText(`${count} tokens`);
  // One row per token, each with its alternatives (3 asked for).
  await expect(page.getByTestId("logprobs-table").locator("tbody tr")).toHaveCount(count);
  const first = await page.getByTestId("token-stream").textContent();
  await shot(page, "16-playground");

  // Same seed, same parameters: the same completion (the stream is the real generation, not a mock).
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByTestId("completion-meta")).toContainText(/finish:/, { timeout: 30_000 });
  await expect(page.getByTestId("token-stream")).toHaveText(first!);

  // Without logprobs the plain text streams in.
  await page.getByLabel("Logprobs").uncheck();
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByTestId("completion-meta")).toContainText(/finish:/, { timeout: 30_000 });
  await expect(page.getByTestId("completion-text")).toHaveText(first!);
  await expect(page.getByTestId("logprobs-table")).toHaveCount(0);

  // Logit bias is JSON: a typo is shown under the field and nothing is sent.
  await page.getByLabel("Logit bias").fill("{the: -100}");
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByText(/Not valid JSON/)).toBeVisible();
  await expect(page.getByTestId("completion-text")).toHaveText(first!);
  await page.getByLabel("Logit bias").fill("");

  // A word of that completion, made a bad word, is not generated again with the same seed.
  const word = first!.match(/[a-z]{2,}/)![0];
  await page.getByLabel("Bad words").fill(word);
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByTestId("completion-text")).not.toHaveText(first!);
  // Read the text once the stream has ended (the button is back from "Generating…").
  await expect(page.getByRole("button", { name: "Generate", exact: true })).toBeEnabled({ timeout: 30_000 });
  await expect(page.getByTestId("completion-meta")).toContainText(/finish:/);
  expect(await page.getByTestId("completion-text").textContent()).not.toContain(word);

  // One stream at a time (Ctrl+Enter submits even while Generate is disabled), and leaving the
  // page stops it rather than reading it on in the background. The stream is held open here (its
  // request never answered), so that it is still running whatever the machine's speed.
  const streams: string[] = [];
  const aborted: string[] = [];
  await page.route("**/api/ui/deployments/*/stream", () => {});
  page.on("request", (r) => void (r.url().endsWith("/stream") && streams.push(r.url())));
  page.on("requestfailed", (r) => void (r.url().endsWith("/stream") && aborted.push(r.url())));
  await page.getByLabel("Bad words").fill("");
  await page.getByRole("button", { name: "Generate" }).click();
  await expect(page.getByRole("button", { name: "Generating…" })).toBeDisabled();
  await page.getByLabel("Prompt").press("Control+Enter");
  await page.getByRole("link", { name: "Datasets" }).click();
  await expect(page).toHaveURL(/\/datasets$/);
  await expect.poll(() => aborted.length).toBe(1);
  expect(streams).toHaveLength(1);
});
