// page.cjs: a web page of another origin calls memory-mcp's Streamable HTTP endpoint with
// fetch, as a browser-based agent would, and prints one JSON line of what it could do.
//
//   node page.cjs LISTED_PAGE_URL UNLISTED_PAGE_URL MCP_URL TOKEN
const { chromium } = require("playwright-core");

const [listed, unlisted, mcpURL, token] = process.argv.slice(2);

// calls runs in the page: initialize with the token, a create in the session, and an
// initialize with a wrong token; each says its status, or the error fetch threw.
async function calls([url, token]) {
  const headers = (extra) => ({ "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...extra });
  const body = (id, method, params) => JSON.stringify({ jsonrpc: "2.0", id, method, params });
  const init = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "page", version: "1" } };
  const out = {};
  try {
    const res = await fetch(url, { method: "POST", headers: headers({ Authorization: "Bearer " + token }), body: body(1, "initialize", init) });
    out.init = res.status;
    out.session = res.headers.get("Mcp-Session-Id") || "";
    await res.text();
    const call = await fetch(url, {
      method: "POST",
      headers: headers({ Authorization: "Bearer " + token, "Mcp-Session-Id": out.session, "Mcp-Protocol-Version": "2025-11-25" }),
      body: body(2, "tools/call", { name: "memory_create", arguments: { path: "/memories/from-a-page.md", file_text: "hello\n" } }),
    });
    out.call = call.status;
    // JSON, or an event stream whose messages may start with a notification of the change
    const answer = await call.text();
    const messages = answer.startsWith("{") ? [answer] : answer.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    out.text = messages.map((m) => JSON.parse(m)).find((m) => m.id === 2).result.content[0].text;
    const bad = await fetch(url, { method: "POST", headers: headers({ Authorization: "Bearer wrong" }), body: body(3, "initialize", init) });
    out.wrongToken = bad.status;
  } catch (e) {
    out.error = String(e);
  }
  return out;
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const result = {};
  for (const [name, pageURL] of [["listed", listed], ["unlisted", unlisted]]) {
    const page = await browser.newPage();
    await page.goto(pageURL);
    result[name] = await page.evaluate(calls, [mcpURL, token]);
    await page.close();
  }
  await browser.close();
  console.log(JSON.stringify(result));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
