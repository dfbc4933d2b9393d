import { expect, test } from "@playwright/test";
import { createKey, hostedApi, shot, signUp, uniqueEmail } from "./pages";

// keys create/revoke, and the revoked key then gets 401 from the API
test("a key is shown once, works, and stops working when revoked", async ({ page, request }) => {
  await signUp(page, { email: uniqueEmail("keys") });
  await page.goto("/settings/keys");
  await expect(page.getByText("No keys yet")).toBeVisible();

  const { dialog, secret } = await createKey(page, "ci pipeline");
  expect(secret).toMatch(/^lmp_sk_[A-Za-z0-9_-]{43}$/);
  await expect(dialog.getByRole("alert")).toContainText("only time the secret is shown");
  await expect(dialog.getByRole("button", { name: "Copy key" })).toBeVisible();
  await shot(page, "09-key-created");
  await dialog.getByRole("button", { name: "Done" }).click();

  // The list shows label, kind and prefix; never the secret.
  const row = page.getByRole("row", { name: /ci pipeline/ });
  await expect(row).toContainText("API");
  await expect(row).toContainText(secret.slice(0, 11));
  await expect(page.getByText(secret)).toHaveCount(0);

  const api = hostedApi(request, secret);
  expect((await api.get("/v1/pipelines/list")).status()).toBe(200);

  // A model key, to see both kinds listed.
  const model = await createKey(page, "playground", "Model key");
  expect(model.secret).toMatch(/^lmp_mk_/);
  await model.dialog.getByRole("button", { name: "Done" }).click();
  await expect(page.getByRole("row", { name: /playground/ })).toContainText("Model");
  await page.reload();
  await expect(row).toContainText(/minute|now/); // last used, recorded by the call above
  await shot(page, "10-keys-list");

  // Revoking asks first; cancelling changes nothing.
  await row.getByRole("button", { name: "Revoke ci pipeline" }).click();
  const confirm = page.getByTestId("revoke-dialog");
  await expect(confirm).toContainText("stops working immediately");
  await shot(page, "11-revoke-confirm");
  await confirm.getByRole("button", { name: "Cancel" }).click();
  expect((await api.get("/v1/pipelines/list")).status()).toBe(200);

  await row.getByRole("button", { name: "Revoke ci pipeline" }).click();
  await confirm.getByRole("button", { name: "Revoke key" }).click();
  await expect(row).toContainText("Revoked");
  const res = await api.get("/v1/pipelines/list");
  expect(res.status()).toBe(401);
  expect(await res.json()).toEqual({ error: { type: "unauthorized", message: "This API key has been revoked." } });
});
