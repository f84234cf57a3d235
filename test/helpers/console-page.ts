import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { type Browser, type BrowserContextOptions, chromium, type Page } from "playwright-core";
import { makeSessionCookie } from "../../src/auth/tokens.ts";
import { CONSOLE_DIST } from "../../src/http/console-routes.ts";
import { SCOPE, type TestServer } from "./server.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];

/** The session secret a console test's server is started with (`AUTH_SESSION_SECRET`). */
export const SESSION_SECRET = "session-secret";

/** Chromium and the built console, which `npm install` and `npm test`'s own steps provide. */
export function assertConsoleReady(): void {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (bash bin/system-deps.sh)`);
  assert.ok(
    fs.existsSync(path.join(CONSOLE_DIST, "index.html")),
    "build the console first: npm run build:console",
  );
}

/** Headless Chromium with a page signed in to `server`'s console for SCOPE (a session cookie). */
export async function consolePage(
  server: TestServer,
  options: BrowserContextOptions = { viewport: { width: 1280, height: 900 } },
): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  const context = await browser.newContext(options);
  const cookie = makeSessionCookie(SESSION_SECRET, SCOPE, Math.floor(Date.now() / 1000) + 3600);
  await context.addCookies([{ name: "session", value: cookie, url: server.url }]);
  return { browser, page: await context.newPage() };
}
