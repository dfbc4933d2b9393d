import { expect, test } from "@playwright/test";
import { createKey, PASSWORD, shot, signUp, uniqueEmail } from "./pages";

// An owner invites a teammate with a link; the teammate creates an account from it, joins, and
// sees the team; the owner makes them an owner, then removes them, and they lose the team.
test("an invite link brings a new teammate in; removing them takes the team away", async ({ page, browser }) => {
  await signUp(page, { email: uniqueEmail("owner"), teamName: "Invite Labs" });
  await page.goto("/settings/members");
  const members = page.getByTestId("members-table");
  await expect(members.getByRole("row")).toHaveCount(2); // the header and the owner
  await expect(members).toContainText("(you)");

  await page.getByLabel("Role of the invited person").selectOption("member");
  await page.getByRole("button", { name: "Create invite link" }).click();
  const link = (await page.getByTestId("invite-link").textContent())!.trim();
  expect(link).toMatch(/\/invite\/lmp_inv_[A-Za-z0-9_-]{43}$/);
  await expect(page.getByTestId("invites-table").getByRole("row")).toHaveCount(2);
  await shot(page, "30-members-invite");

  // The teammate, in a browser of their own, signed out.
  const other = await browser.newContext({ baseURL: test.info().project.use.baseURL });
  const mate = await other.newPage();
  const mateEmail = uniqueEmail("mate");
  await mate.goto(link);
  await expect(mate.getByRole("heading", { name: "Join Invite Labs" })).toBeVisible();
  await mate.getByRole("link", { name: "Create an account" }).click();
  await mate.getByLabel("Email").fill(mateEmail);
  await mate.getByLabel("Password").fill(PASSWORD);
  await mate.getByRole("button", { name: "Create account" }).click();
  // Back on the invite once signed in.
  await expect(mate).toHaveURL(/\/invite\/lmp_inv_/);
  await shot(mate, "31-invite-accept");
  await mate.getByRole("button", { name: "Join Invite Labs" }).click();
  await expect(mate).toHaveURL(/\/pipelines$/);
  await expect(mate.getByLabel("Team").locator("option:checked")).toHaveText("Invite Labs");

  // A member makes model keys (not API keys).
  const made = await createKey(mate, "mate's backend", "Model key");
  expect(made.secret).toMatch(/^lmp_mk_/);
  // Escape does not lose a secret shown once: only Done closes the dialog.
  await mate.keyboard.press("Escape");
  await expect(made.dialog.getByTestId("new-key-secret")).toHaveText(made.secret);
  await made.dialog.getByRole("button", { name: "Done" }).click();

  // The link is used up.
  await mate.goto(link);
  await expect(mate.getByRole("heading", { name: "Invite link not valid" })).toBeVisible();

  // The owner sees them, and makes them an owner.
  await page.reload();
  const row = members.locator(`tr[data-member="${mateEmail}"]`);
  await expect(row).toContainText(mateEmail);
  await Promise.all([
    page.waitForResponse((r) => r.url().includes("/api/ui/team/members/") && r.request().method() === "PATCH"),
    row.getByLabel(`Role of ${mateEmail}`).selectOption("owner"),
  ]);
  await page.reload();
  await expect(row.getByLabel(`Role of ${mateEmail}`)).toHaveValue("owner");
  await expect(page.getByTestId("invites-table")).toHaveCount(0);

  // As an owner they make an invite link; made a member again, they lose it, and the owner's
  // list shows that at once.
  await mate.goto("/settings/members");
  await mate.getByRole("button", { name: "Create invite link" }).click();
  await expect(mate.getByTestId("invite-link")).toBeVisible();
  await page.reload();
  await expect(page.getByTestId("invites-table").getByRole("row")).toHaveCount(2);
  await row.getByLabel(`Role of ${mateEmail}`).selectOption("member");
  await expect(page.getByTestId("invites-table")).toHaveCount(0);

  // Removed: asked first, then gone from the list; their next page is their own team's.
  await row.getByRole("button", { name: `Remove ${mateEmail}` }).click();
  const confirm = page.getByTestId("remove-member-dialog");
  await expect(confirm).toContainText("loses access to the team at once");
  await expect(confirm.getByRole("checkbox", { name: /Also revoke the keys they made \(1 valid now\)/ })).toBeChecked();
  await confirm.getByRole("button", { name: "Remove member" }).click();
  await expect(row).toHaveCount(0);
  // The key they made is revoked with them, and says who made it.
  await page.goto("/settings/keys");
  const keyRow = page.getByRole("row", { name: /mate's backend/ });
  await expect(keyRow).toContainText(mateEmail);
  await expect(keyRow).toContainText("Revoked");
  await mate.goto("/settings/members");
  await expect(mate.getByRole("heading", { name: "Members" })).toBeVisible();
  await expect(mate.getByText("People in the Invite Labs team")).toHaveCount(0);
  await expect(mate.getByLabel("Team", { exact: true })).toHaveCount(0); // one team left: no switcher
  await other.close();
});
