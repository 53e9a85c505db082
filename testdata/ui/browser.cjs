// Browser tests of the web page, run by ui_test.go in Debian's chromium through
// playwright-core (no browser download). Usage: node browser.cjs local|tenants|mounts
//
// Environment: UI_URL (local: the login link memory-mcp ui printed; tenants: the server's
// base URL), ROOT (the memory's directory on disk), SHOTS (where screenshots go), and for
// tenants RW_TOKEN and RO_TOKEN. The script asks the Go test for an agent's change by
// printing "AGENT <path> <text as JSON>" and waits for a line on stdin.
"use strict";
const { chromium } = require("playwright-core");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(k + " is not set");
  return v;
};
const mode = process.argv[2];
const shots = env("SHOTS");
const root = env("ROOT");
const disk = (p) => path.join(root, p.replace(/^\/memories\/?/, ""));
const readDisk = (p) => fs.readFileSync(disk(p), "utf8");

const lines = readline.createInterface({ input: process.stdin });
const answers = [];
let waiting = null;
lines.on("line", (l) => (waiting ? (waiting(l), (waiting = null)) : answers.push(l)));
const ask = (msg) =>
  new Promise((resolve) => {
    console.log(msg);
    if (answers.length) resolve(answers.shift());
    else waiting = resolve;
  });

function step(name) {
  console.error("step: " + name);
}

// watch records what must never happen on the page: a dialog, a request outside the page's
// own /ui/, a page error.
function watch(page, base) {
  const bad = [];
  page.on("dialog", (d) => {
    bad.push("dialog: " + d.type() + " " + d.message());
    d.dismiss();
  });
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(base + "/ui/")) bad.push("request: " + u);
  });
  page.on("pageerror", (e) => bad.push("page error: " + e.message));
  return bad;
}

async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

async function treeItem(page, p) {
  const item = page.locator(`#tree li[data-path="${p}"] > .row`);
  await item.waitFor();
  return item;
}

// openFile opens a file from the tree and waits until the page shows it.
async function openFile(page, p) {
  await (await treeItem(page, p)).click();
  const name = p.slice(p.lastIndexOf("/") + 1);
  await until("the page showing " + p, async () => (await page.locator("#main h1").innerText()) === name && (await page.locator("#content, #main .empty").count()) > 0);
}

async function confirm(page) {
  await page.locator("#dialog[open]").waitFor();
  await page.click("#dialog-ok");
  await page.locator("#dialog[open]").waitFor({ state: "detached" }).catch(() => {});
  await page.waitForFunction(() => !document.getElementById("dialog").open);
}

// typeInto types text into a field as a person does: a click, select what is there, type.
async function typeInto(page, selector, text) {
  await page.click(selector);
  await page.keyboard.press("Control+A");
  await page.keyboard.type(text);
}

async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {}
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function local() {
  const link = env("UI_URL");
  const base = new URL(link).origin;
  const browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: "en-US", timezoneId: "UTC" });
  const page = await context.newPage();
  const bad = watch(page, base);
  // The seed is over: a second from now, the memory as seeded is the memory "at" t0.
  await new Promise((r) => setTimeout(r, 1100));
  const t0 = new Date(Math.floor(Date.now() / 1000) * 1000);

  step("the link logs in and leaves the token out of the address");
  await page.goto(link);
  await treeItem(page, "/memories/notes.md");
  assert.equal(new URL(page.url()).search, "");
  assert.ok(!(await page.locator("#read-only").isVisible()));
  await page.screenshot({ path: path.join(shots, "home.png") });

  step("navigate the tree with the keyboard");
  await page.locator('#tree li[data-path="/memories"]').focus();
  await page.keyboard.press("ArrowDown"); // evil.md
  await page.keyboard.press("ArrowDown"); // notes.md
  await page.keyboard.press("Enter");
  await page.locator("#content").waitFor();
  assert.match(await page.locator("#main h1").innerText(), /notes\.md/);
  assert.match(await page.locator("#content").innerText(), /The user prefers spaces\./);
  await page.keyboard.press("ArrowDown"); // projects/
  await page.keyboard.press("ArrowRight"); // opens it
  await page.keyboard.press("ArrowDown"); // alpha.md
  await page.keyboard.press("Enter");
  await until("alpha.md shown", async () => /Alpha: due in March/.test(await page.locator("#content").innerText()));
  await page.screenshot({ path: path.join(shots, "file.png") });

  step("a file full of markup is shown as text and runs nothing");
  await openFile(page, "/memories/evil.md");
  assert.equal(await page.locator("#content").innerText(), readDisk("/memories/evil.md").replace(/\n$/, ""));
  assert.equal(await page.locator("#main img, #main script, #main a, #main iframe").count(), 0);

  step("the timeline shows a diff between versions");
  await openFile(page, "/memories/notes.md");
  await page.click("#tab-history");
  await page.locator("#diff").waitFor();
  const diff = await page.locator("#diff").innerText();
  assert.match(diff, /^-The user prefers tabs\.$/m);
  assert.match(diff, /^\+The user prefers spaces\.$/m);
  // One numbering: the diff's header names the two versions the list shows.
  assert.deepEqual(await page.locator("#versions .v-seq").allInnerTexts(), ["#4", "#1"]);
  assert.match(diff, /^--- \/memories\/notes\.md@1$/m);
  assert.match(diff, /^\+\+\+ \/memories\/notes\.md@4$/m);
  const oldest = page.locator("#versions li").last();
  await oldest.locator("button").click();
  await page.selectOption("#compare", { index: 1 }); // the newest version, against the oldest
  await until("the diff between two chosen versions", async () => /^\+The user prefers spaces\.$/m.test(await page.locator("#diff").innerText()));
  await page.screenshot({ path: path.join(shots, "history.png") });

  step("restore the first version and see the file change on disk");
  await page.click("#restore-version");
  await confirm(page);
  await until("the restored content on disk", () => readDisk("/memories/notes.md").includes("The user prefers tabs."));
  await until("the restore in the timeline", async () => /restore/.test(await page.locator("#versions").innerText()));

  step("edit a file: saved on disk, recorded as actor web");
  await page.click("#tab-content");
  await page.locator("#content").waitFor();
  await page.locator("#edit").click();
  await typeInto(page, "#editor", "# Notes\n\nEdited by a person.\n");
  await page.keyboard.press("Control+s");
  await until("the edit on disk", () => readDisk("/memories/notes.md") === "# Notes\n\nEdited by a person.\n");
  await page.click("#tab-history");
  await until("the edit in the timeline", async () => /^web · edit/m.test(await page.locator("#versions li").first().innerText()));

  step("delete a file");
  await openFile(page, "/memories/projects/alpha.md");
  await page.locator("#delete").click();
  await confirm(page);
  await until("the file gone from disk", () => !fs.existsSync(disk("/memories/projects/alpha.md")));
  await until("the file gone from the tree", async () => (await page.locator('#tree li[data-path="/memories/projects/alpha.md"]').count()) === 0);
  await (await treeItem(page, "/memories/projects")).click();
  await until("the directory's facts", async () => /^1 entry · /.test(await page.locator("#main .facts").first().innerText()));

  step("search across files");
  await page.keyboard.press("/");
  await page.keyboard.type("TUESDAYS");
  await page.keyboard.press("Enter");
  await page.locator("#results").waitFor();
  const results = await page.locator("#results").innerText();
  assert.match(results, /\/memories\/projects\/beta\.md/);
  assert.match(results, /Release on Tuesdays/);
  await page.screenshot({ path: path.join(shots, "search.png") });
  await page.locator("#results button").first().click();
  await page.locator("#content .line.hit").waitFor();
  assert.match(await page.locator("#content .line.hit").innerText(), /Tuesdays/);

  step("search for markup shows it as text");
  await typeInto(page, "#search", "onerror");
  await page.keyboard.press("Enter");
  await until("the markup result", async () => /onerror/.test(await page.locator("#results").innerText()));
  assert.equal(await page.locator("#main img").count(), 0);

  step("an agent's change over MCP, made by another process, appears live");
  await page.locator("#home").click();
  const answer = await ask('AGENT /memories/agent.md "Learned: the build needs Go 1.26.\\n"');
  assert.equal(answer, "done");
  await until("the agent's file in the activity feed", async () => /\/memories\/agent\.md/.test(await page.locator("#feed").innerText()));
  // A path in the feed wraps only after a slash, never inside a name, and says itself whole
  // in a tooltip.
  const item = page.locator("#feed .what").first();
  assert.equal(await item.getAttribute("title"), "/memories/agent.md");
  assert.ok((await item.locator("wbr").count()) >= 1, "no place to wrap a path after its slashes");
  assert.equal(await item.evaluate((e) => getComputedStyle(e).wordBreak), "normal", "paths may break inside names");
  await treeItem(page, "/memories/agent.md");
  await page.screenshot({ path: path.join(shots, "live.png") });

  step("what a person types survives a load of the editor that ends late");
  await openFile(page, "/memories/agent.md");
  let release;
  const held = new Promise((r) => (release = r));
  let heldRequest = null;
  await page.route("**/api/file?*", async (route) => {
    if (!heldRequest) {
      heldRequest = route.request(); // the editor's first load, held back
      await held;
    }
    await route.continue();
  });
  await page.locator("#edit").click();
  await until("the editor's load held", async () => heldRequest !== null);
  // Another process's change makes the page refresh the view, which loads the editor again.
  assert.equal(await ask('AGENT /memories/agent2.md "Another fact.\\n"'), "done");
  await page.locator("#editor").waitFor();
  await typeInto(page, "#editor", "Typed by a person.\n");
  release();
  await heldRequest.response(); // the first load ends now, after the editor was filled
  await page.waitForTimeout(300);
  await page.unroute("**/api/file?*");
  assert.equal(await page.locator("#editor").inputValue(), "Typed by a person.\n", "the typed text was replaced");
  await page.keyboard.press("Escape");
  await page.locator("#content").waitFor();

  step("a narrow (phone) window and dark mode");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator("#toggle-files").click();
  await openFile(page, "/memories/agent.md");
  await page.screenshot({ path: path.join(shots, "phone.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(bg, "rgb(247, 247, 249)", "dark mode follows the system");
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.screenshot({ path: path.join(shots, "dark.png") });

  step("a new file: the dialog takes typing, Backspace and Escape; Enter creates it");
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.locator("#home").click();
  await page.locator("#new-file").click();
  await page.locator("#dialog[open] #new-path").waitFor();
  await page.keyboard.type("people/dana.mdX");
  await page.keyboard.press("Backspace");
  assert.equal(await page.locator("#new-path").inputValue(), "/memories/people/dana.md");
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.getElementById("dialog").open);
  assert.equal(await page.locator("#editor").count(), 0, "Escape created nothing");
  await page.locator("#new-file").click();
  await page.locator("#dialog[open] #new-path").waitFor();
  await page.keyboard.type("people/dana.md");
  await page.keyboard.press("Enter");
  await page.locator("#editor").waitFor();
  await page.keyboard.type("Dana prefers short answers.\n");
  await page.keyboard.press("Control+s");
  await until("the new file on disk", () => fs.existsSync(disk("/memories/people/dana.md")) && readDisk("/memories/people/dana.md") === "Dana prefers short answers.\n");

  step("a new file the secret guard refuses says why, and offers no version to load");
  await page.locator("#new-file").click();
  await page.locator("#dialog[open] #new-path").waitFor();
  await page.keyboard.type("keys.md");
  await page.keyboard.press("Enter");
  await page.locator("#editor").waitFor();
  await page.keyboard.type("aws_access_key_id = AKIAIOSFODNN7EXAMPLF\n");
  await page.keyboard.press("Control+s");
  await until("the refusal", async () => /looks like an Amazon Web Services access key/.test(await page.locator("#edit-banner").innerText()));
  assert.equal(await page.locator("#edit-banner button").count(), 0, "a version to load is offered for a file that has none");
  assert.ok(!fs.existsSync(disk("/memories/keys.md")));
  await page.keyboard.press("Escape");

  step("the whole memory back as it was at a time, typed into the time field");
  const two = (n) => String(n).padStart(2, "0");
  const h12 = t0.getUTCHours() % 12 || 12;
  await page.click("#restore-at", { position: { x: 8, y: 10 } });
  await page.keyboard.type(two(t0.getUTCMonth() + 1) + two(t0.getUTCDate()) + t0.getUTCFullYear());
  await page.keyboard.press("Tab");
  await page.keyboard.type(two(h12) + two(t0.getUTCMinutes()) + two(t0.getUTCSeconds()) + (t0.getUTCHours() < 12 ? "A" : "P"));
  // A time field drops ":00" seconds from its value (HTML's normalized local date and time).
  assert.equal(await page.locator("#restore-at").inputValue(), t0.toISOString().slice(0, 19).replace(/:00$/, ""));
  await page.keyboard.press("Enter");
  await confirm(page);
  await until("the memory as seeded, on disk", () => fs.existsSync(disk("/memories/projects/alpha.md")) && !fs.existsSync(disk("/memories/agent.md")) && !fs.existsSync(disk("/memories/people/dana.md")));
  assert.match(readDisk("/memories/notes.md"), /The user prefers spaces\./);

  step("the one-time link does not work twice");
  const again = await browser.newContext();
  const res = await (await again.newPage()).goto(link);
  assert.equal(res.status(), 401);
  assert.match(await res.text(), /Run memory-mcp ui again: it prints a new link\./);
  await again.close();

  step("nothing in the memory ran");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(bad, []);
  await browser.close();
}

async function tenants() {
  const base = env("UI_URL");
  const browser = await launch();
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  const bad = watch(page, base);

  step("a first visit asks to log in, without saying a session ended");
  await page.goto(base + "/ui/");
  await page.locator("#login-token").waitFor();
  assert.equal(await page.locator("#login-error").innerText(), "");

  step("a wrong token is refused");
  await typeInto(page, "#login-token", "mmcp_not-a-token");
  await page.keyboard.press("Enter");
  await until("the refusal", async () => /no memory/.test(await page.locator("#login-error").innerText()));
  await page.screenshot({ path: path.join(shots, "login.png") });

  step("a tenant logs in with its bearer token and changes its own memory");
  await typeInto(page, "#login-token", env("RW_TOKEN"));
  await page.click("#login-form button");
  await treeItem(page, "/memories/secret.md");
  assert.match(await page.locator("#memory-name").innerText(), /alice/);
  await openFile(page, "/memories/secret.md");
  await page.locator("#edit").click();
  await typeInto(page, "#editor", "alice's secret, edited on the page\n");
  await page.click("#save");
  await until("alice's edit on disk", () => fs.readFileSync(path.join(root, "alice", "secret.md"), "utf8") === "alice's secret, edited on the page\n");
  await page.click("#logout");
  await page.locator("#login-token").waitFor();

  step("a read-only tenant sees but cannot change");
  await typeInto(page, "#login-token", env("RO_TOKEN"));
  await page.keyboard.press("Enter");
  await treeItem(page, "/memories/secret.md");
  assert.ok(await page.locator("#read-only").isVisible());
  await openFile(page, "/memories/secret.md");
  assert.equal(await page.locator("#edit, #delete, #new-file, #restore-all").filter({ visible: true }).count(), 0);
  const before = fs.readFileSync(path.join(root, "carol", "secret.md"), "utf8");
  const status = await page.evaluate(async () => {
    const s = await (await fetch("api/session")).json();
    const r = await fetch("api/save", { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": s.csrf }, body: JSON.stringify({ path: "/memories/secret.md", text: "changed" }) });
    return r.status;
  });
  assert.equal(status, 403);
  assert.equal(fs.readFileSync(path.join(root, "carol", "secret.md"), "utf8"), before);
  await page.screenshot({ path: path.join(shots, "read-only.png") });
  assert.deepEqual(bad, []);
  await browser.close();
}

// mounts: a main store with a read-write mount "me" (ROOT_ME on disk, with history) and a
// read-only mount "team" (ROOT_TEAM).
async function mounts() {
  const link = env("UI_URL");
  const base = new URL(link).origin;
  const browser = await launch();
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: "en-US", timezoneId: "UTC" })).newPage();
  const bad = watch(page, base);
  // The seed is over: a second from now, the memory as seeded is the memory "at" t0.
  await new Promise((r) => setTimeout(r, 1100));
  const t0 = new Date(Math.floor(Date.now() / 1000) * 1000);

  step("the mounts show as top-level folders");
  await page.goto(link);
  await treeItem(page, "/memories/me");
  await treeItem(page, "/memories/team");
  await page.screenshot({ path: path.join(shots, "mounts.png") });

  step("a read-write mount: its history, and an edit typed on the page");
  await (await treeItem(page, "/memories/me")).click();
  await until("the mount's recent changes", async () => /prefs\.md/.test(await page.locator("#dir-history").innerText()));
  assert.equal(await page.getByRole("button", { name: "Delete…" }).count(), 0); // a mount point stays
  assert.equal(await page.getByRole("button", { name: "New file here" }).count(), 1);
  await openFile(page, "/memories/me/prefs.md");
  await page.click("#tab-history");
  await page.locator("#diff").waitFor();
  assert.match(await page.locator("#diff").innerText(), /^\+Prefers short answers\.$/m);
  assert.match(await page.locator("#diff").innerText(), /^--- \/memories\/me\/prefs\.md@/m);
  await page.click("#tab-content");
  await page.locator("#edit").click();
  await typeInto(page, "#editor", "Prefers tables.\n");
  await page.keyboard.press("Control+s");
  const me = path.join(env("ROOT_ME"), "prefs.md");
  await until("the edit in the mount's directory", () => fs.readFileSync(me, "utf8") === "Prefers tables.\n");

  step("the activity, loaded again, has the mount's changes; the whole memory goes back to a time, mount included");
  await page.reload();
  // Each store numbers its own versions: the main store's #1 and the mount's #1 are two changes.
  await until("the mount's changes in the activity", async () => {
    const items = await page.locator("#feed li").allInnerTexts();
    return items.filter((t) => /prefs\.md/.test(t)).length === 3 && items.filter((t) => /notes\.md/.test(t)).length === 1 && !items.some((t) => / more/.test(t));
  });
  const restoreAt = async (t) => {
    const two = (n) => String(n).padStart(2, "0");
    await page.click("#restore-at", { position: { x: 8, y: 10 } });
    await page.keyboard.type(two(t.getUTCMonth() + 1) + two(t.getUTCDate()) + t.getUTCFullYear());
    await page.keyboard.press("Tab");
    await page.keyboard.type(two(t.getUTCHours() % 12 || 12) + two(t.getUTCMinutes()) + two(t.getUTCSeconds()) + (t.getUTCHours() < 12 ? "A" : "P"));
    await page.keyboard.press("Enter");
    await confirm(page);
  };
  await restoreAt(t0);
  await until("the mount's file as it was", () => fs.readFileSync(me, "utf8") === "Prefers short answers.\n");
  await until("the restore's note names the mount", async () => /\/memories\/me version #4/.test(await page.locator("#toast").innerText()));
  assert.equal(fs.readFileSync(path.join(env("ROOT"), "notes.md"), "utf8"), "main\n");

  step("a read-only mount: no edit, delete, new file or restore");
  await (await treeItem(page, "/memories/team")).click();
  await until("the team folder", async () => /team\//.test(await page.locator("#main h1").innerText()));
  assert.equal(await page.getByRole("button", { name: "New file here" }).count(), 0);
  assert.equal(await page.getByRole("button", { name: "Delete…" }).count(), 0);
  await openFile(page, "/memories/team/style.md");
  assert.match(await page.locator("#content").innerText(), /tabs/);
  assert.equal(await page.locator("#edit, #delete").count(), 0);
  await page.keyboard.press("e"); // the edit shortcut does nothing here
  assert.equal(await page.locator("#editor").count(), 0);
  await page.screenshot({ path: path.join(shots, "mount-read-only.png") });
  assert.equal(fs.readFileSync(path.join(env("ROOT_TEAM"), "style.md"), "utf8"), "tabs\n");

  step("a whole-memory restore that a mount's storage fails: the rest goes back, and the page says which mount did not");
  await page.locator("#home").click();
  await page.locator("#new-file").click();
  await page.locator("#dialog[open] #new-path").waitFor();
  await page.keyboard.type("later.md");
  await page.keyboard.press("Enter");
  await page.locator("#editor").waitFor();
  await page.keyboard.type("Made after the time.\n");
  await page.keyboard.press("Control+s");
  const later = path.join(env("ROOT"), "later.md");
  await until("the new file on disk", () => fs.existsSync(later));
  await treeItem(page, "/memories/later.md");
  fs.rmSync(env("ROOT_ME"), { recursive: true });
  await page.locator("#home").click();
  await restoreAt(t0);
  await until("the note names the mount left as it was", async () => /the rest of the memory was restored, but \/memories\/me was not: the storage failed/.test(await page.locator("#toast").innerText()));
  assert.ok(!fs.existsSync(later));
  await until("the tree as the memory now is", async () => (await page.locator('#tree li[data-path="/memories/later.md"]').count()) === 0);
  assert.deepEqual(bad, []);
  await browser.close();
}

({ local, tenants, mounts })[mode]().then(
  () => process.exit(0),
  (err) => {
    console.error(err && err.stack ? err.stack : err);
    process.exit(1);
  },
);
