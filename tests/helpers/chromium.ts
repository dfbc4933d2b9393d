// How every browser test and benchmark launches Debian's Chromium: browser downloads fail
// offline, and without the background-networking flags Chromium keeps dialling closed hosts.
export const chromiumLaunchOptions = {
  executablePath: process.env.E2E_CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
  ],
};
