import { expect, test } from "@playwright/test";
import { createKey, createPipeline, hostedApi, PASSWORD, shot, signUp, uniqueEmail } from "./pages";

// sign-up → create pipeline → add samples through the API → filter → preview
test("a new user collects samples, filters them and reads one", async ({ page, request }) => {
  // Every dashboard page needs a session.
  await page.goto("/pipelines");
  await expect(page).toHaveURL(/\/sign-in\?callbackUrl=%2Fpipelines$/);
  await expect(page.getByRole("heading", { name: "Sign in to your team" })).toBeVisible();
  await shot(page, "01-sign-in");

  // Sign-up validates with the API's schema before sending anything.
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.getByLabel("Email").fill("not-an-email");
  await page.getByLabel("Password").fill("short");
  await page.getByRole("button", { name: "Create account" }).click();
  await expect(page.getByText("must be an email address")).toBeVisible();
  await expect(page.getByText("must be at least 8 characters")).toBeVisible();
  await shot(page, "02-sign-up-errors");

  const email = uniqueEmail("ada");
  await signUp(page, { email, name: "Ada Lovelace", teamName: "Analytical Engines" });
  await expect(page.getByText("No pipelines yet")).toBeVisible();
  await expect(page.getByText("Analytical Engines")).toBeVisible();
  await shot(page, "03-pipelines-empty");

  const pipelineId = await createPipeline(page, "support-chats");
  await expect(page.getByRole("heading", { name: "support-chats" })).toBeVisible();
  // The empty state's request names this pipeline, ready to copy.
  await expect(page.getByTestId("add-sample-curl")).toContainText(`/v1/pipelines/${pipelineId}/add`);
  await expect(page.getByRole("button", { name: "Copy" })).toBeVisible();
  await shot(page, "04-pipeline-empty");

  const { secret } = await createKey(page, "ingest");
  await page.getByRole("button", { name: "Done" }).click();

  // 30 samples: users u1/u2 alternate, every third in French.
  const api = hostedApi(request, secret);
  for (let i = 0; i < 30; i++) {
    const res = await api.post(`/v1/pipelines/${pipelineId}/add`, {
      messages: [
        { role: "system", content: "You are a helpful support agent." },
        { role: "user", content: `Question number ${i}` },
        { role: "assistant", content: `Answer number ${i}` },
      ],
      userId: i % 2 === 0 ? "u1" : "u2",
      groupId: "support",
      metadata: { lang: i % 3 === 0 ? "fr" : "en", turn: String(i) },
    });
    expect(res.status()).toBe(200);
  }

  // The list shows the pipeline with its sample count.
  await page.goto("/pipelines");
  const row = page.getByRole("row", { name: /support-chats/ });
  await expect(row.getByTestId("sample-count")).toHaveText("30");
  await shot(page, "05-pipelines-list");

  await row.getByRole("link", { name: "support-chats" }).click();
  await expect(page.getByTestId("selection-count")).toHaveText("30");
  await expect(page.getByTestId("samples-table").locator("tbody tr")).toHaveCount(30);

  // Filters: userId, then a metadata chip; the count and the table follow, the URL keeps them.
  await page.getByLabel("userId").fill("u1");
  await page.getByLabel("userId").press("Enter");
  await expect(page).toHaveURL(/userId=u1/);
  await expect(page.getByTestId("selection-count")).toHaveText("15");
  await page.getByLabel("Metadata key").fill("lang");
  await page.getByLabel("Value").fill("fr");
  await page.getByRole("button", { name: "Add filter" }).click();
  // u1 has even i; French is i % 3 == 0: i in {0, 6, 12, 18, 24}.
  await expect(page.getByTestId("selection-count")).toHaveText("5");
  await expect(page).toHaveURL(/meta\.lang=fr/);
  const rows = page.getByTestId("samples-table").locator("tbody tr");
  await expect(rows).toHaveCount(5);
  for (const text of await rows.allTextContents()) expect(text).toMatch(/u1.*lang=fr/);
  await shot(page, "06-selection-filtered");

  // Reloading keeps the selection; removing the chip widens it again.
  await page.reload();
  await expect(page.getByTestId("selection-count")).toHaveText("5");
  await expect(page.getByTestId("filter-chip")).toHaveText(/lang = fr/);
  await page.getByRole("button", { name: "Remove filter lang = fr" }).click();
  await expect(page.getByTestId("selection-count")).toHaveText("15");
  await expect(page).not.toHaveURL(/meta\.lang/);
  // A row's metadata chip is a button of its own for the keyboard too: Enter filters by it.
  const chip = rows.first().getByRole("button", { name: /^lang=/ });
  const lang = (await chip.textContent())!.split("=")[1];
  await chip.focus();
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`meta\\.lang=${lang}`));
  await expect(page.getByTestId("sample-panel")).toHaveCount(0);
  await page.getByRole("button", { name: `Remove filter lang = ${lang}` }).click();
  await expect(page.getByTestId("selection-count")).toHaveText("15");

  // Preview: click a row, then J/K move through the page; the conversation comes from the signed URL.
  await rows.first().click();
  const panel = page.getByTestId("sample-panel");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 0/);
  await expect(panel.locator('[data-role="assistant"]')).toHaveText(/Answer number 0/);
  await expect(panel.locator('[data-role="system"]')).toHaveText(/helpful support agent/);
  await shot(page, "07-sample-panel");
  await page.keyboard.press("j");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 2/);
  await page.keyboard.press("ArrowDown");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 4/);
  await page.keyboard.press("k");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 2/);
  // Inside the sample's text the arrow keys scroll it; J and K still move.
  await panel.getByRole("tabpanel").click();
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("j");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 4/);
  await page.keyboard.press("k");
  await expect(panel.locator('[data-role="user"]')).toHaveText(/Question number 2/);
  await panel.getByRole("tab", { name: "Raw JSON" }).click();
  const json = JSON.parse((await panel.getByTestId("sample-json").textContent())!);
  expect(json).toEqual([
    { role: "system", content: "You are a helpful support agent." },
    { role: "user", content: "Question number 2" },
    { role: "assistant", content: "Answer number 2" },
  ]);
  await page.emulateMedia({ colorScheme: "dark" });
  await panel.getByRole("tab", { name: "Conversation" }).click();
  await shot(page, "08-sample-panel-dark");
  await page.emulateMedia({ colorScheme: "light" });
  await page.keyboard.press("Escape");
  await expect(panel).toBeHidden();
  // Outside the table and the panel, J and the arrows are the page's: no sample opens.
  await page.getByRole("heading", { level: 1 }).click();
  await page.keyboard.press("j");
  await page.keyboard.press("ArrowDown");
  await expect(panel).toBeHidden();

  // Paging: 15 matches at 25 per page, then the unfiltered 30 over two pages.
  await page.getByRole("button", { name: "Clear filters" }).click();
  await expect(page.getByTestId("selection-count")).toHaveText("30");
  await page.getByLabel("Rows per page").selectOption("25");
  await expect(page).toHaveURL(/limit=25/);
  await expect(rows).toHaveCount(25);
  await expect(page.getByTestId("page-range")).toHaveText("1–25 of 30");
  await page.getByRole("button", { name: "Next" }).click();
  await expect(page).toHaveURL(/offset=25/);
  await expect(rows).toHaveCount(5);
  await expect(page.getByTestId("page-range")).toHaveText("26–30 of 30");
  await expect(rows.first()).toContainText("turn=25");

  // Sign out: the dashboard is closed again, and comes back to the same selection after signing in.
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/sign-in/);
  const deepLink = `/pipelines/${pipelineId}?userId=u2`;
  await page.goto(deepLink);
  await expect(page).toHaveURL(`/sign-in?callbackUrl=${encodeURIComponent(deepLink)}`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(deepLink);
  await expect(page.getByTestId("selection-count")).toHaveText("15");
});
