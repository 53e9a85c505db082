// memory-mcp's web page. No framework and no build step: the DOM, fetch and EventSource.
//
// Rule of this file: memory content, file names and everything else that comes from the
// memory is put into the page with textContent (through el()), never as HTML, and never as
// a link's address. A memory file holding <script>, <img onerror=…> or a javascript: link
// is shown as the characters it holds.

const $ = (id) => document.getElementById(id);
const ROOT = "/memories";

// mountAt is the mounted store whose mount point is p, if any; fixed says whether p can be
// changed: not in a read-only memory, nor in a read-only mount.
const mountAt = (p) => (state.session.mounts || []).find((m) => m.path === p);
const fixed = (p) =>
  state.session.read_only || (state.session.mounts || []).some((m) => m.read_only && (p === m.path || p.startsWith(m.path + "/")));
// via names the MCP client a version came through, if it came through one.
const via = (v) => {
  const c = v.client;
  if (!c) return "";
  const how = [c.transport, c.tenant && "tenant " + c.tenant].filter(Boolean).join(", ");
  return " · via " + [c.name, c.version].filter(Boolean).join(" ") + (how ? ` (${how})` : "");
};

const state = {
  session: null, // {memory, read_only, mounts, history, csrf, max_file_bytes}
  tree: null,
  expanded: new Set([ROOT]),
  view: null, // what main shows: {kind: "file"|"dir"|"search"|"home", ...}
  editing: null, // {path, sha256, isNew}
  feed: [],
  events: null,
};

// el builds an element; string and number children become text nodes.
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function api(name, params, body) {
  let url = "api/" + name;
  if (params) url += "?" + new URLSearchParams(params);
  const opts = { credentials: "same-origin", cache: "no-store", headers: {} };
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    if (state.session) opts.headers["X-CSRF-Token"] = state.session.csrf;
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(url, opts);
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (res.status === 401 && name !== "login") {
    showLogin(state.session ? "Your session ended: log in again." : "");
  }
  if (!res.ok) throw new ApiError((data && data.error) || res.statusText, res.status);
  return data;
}

// ---- Formatting -----------------------------------------------------------------------

function size(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(n < 10240 ? 1 : 0) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

function ago(t) {
  if (!t) return "";
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 45) return "just now";
  if (s < 90 * 60) return Math.max(1, Math.round(s / 60)) + " min ago";
  if (s < 36 * 3600) return Math.round(s / 3600) + " h ago";
  if (s < 60 * 86400) return Math.round(s / 86400) + " d ago";
  return new Date(t).toLocaleDateString();
}

function when(t) {
  return el("time", { datetime: t, title: new Date(t).toLocaleString() }, ago(t));
}

// pathText shows a path that may wrap after each slash only, never inside a name.
function pathText(p) {
  return el("span", { class: "path" }, p.split("/").flatMap((part, i) => (i ? [el("wbr"), "/" + part] : [part])));
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function baseName(p) {
  return p.slice(p.lastIndexOf("/") + 1);
}

function parentOf(p) {
  return p.slice(0, p.lastIndexOf("/")) || ROOT;
}

let toastTimer;
function toast(msg, bad = false) {
  const t = $("toast");
  t.textContent = msg;
  t.className = "toast show" + (bad ? " bad" : "");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.className = "toast"), bad ? 6000 : 3000);
}

function failed(err) {
  if (err instanceof ApiError && err.status === 401) return;
  toast(err.message || String(err), true);
}

// confirmDialog asks before a change; it resolves to true when the person confirms.
// body is a list of nodes; input, when given, is an <input> whose value the caller reads.
function confirmDialog(title, body, okText, { danger = false, input = null } = {}) {
  const d = $("dialog");
  $("dialog-title").textContent = title;
  $("dialog-body").replaceChildren(...body, ...(input ? [input] : []));
  const ok = $("dialog-ok");
  ok.textContent = okText;
  ok.className = danger ? "primary danger" : "primary";
  return new Promise((resolve) => {
    const done = (v) => {
      ok.onclick = $("dialog-cancel").onclick = d.onclose = null;
      if (d.open) d.close();
      resolve(v);
    };
    ok.onclick = () => done(true);
    $("dialog-cancel").onclick = () => done(false);
    d.onclose = () => done(false);
    // Enter confirms; every other key types as usual (a handler that returned false for
    // them would cancel them), and Escape closes the dialog, which cancels.
    if (input)
      input.onkeydown = (e) => {
        if (e.key === "Enter") {
          e.preventDefault();
          done(true);
        }
      };
    d.showModal();
    (input || $("dialog-cancel")).focus();
  });
}

// ---- Start, login, session --------------------------------------------------------------

async function start() {
  try {
    state.session = await api("session");
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) showLogin(err.message);
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("memory-name").textContent = state.session.memory ? "tenant " + state.session.memory : ROOT;
  $("read-only").hidden = !state.session.read_only;
  document.querySelectorAll("[data-change]").forEach((e) => (e.hidden = state.session.read_only));
  document.querySelectorAll("[data-history]").forEach((e) => (e.hidden = e.hidden || !state.session.history));
  connect();
  await Promise.all([loadTree(), loadFeed()]);
  route();
}

function showLogin(message) {
  state.session = null;
  if (state.events) state.events.close();
  // Nothing of the memory just left stays in the page.
  Object.assign(state, { tree: null, view: null, editing: null, feed: [], events: null, expanded: new Set([ROOT]) });
  $("tree").replaceChildren();
  $("main").replaceChildren();
  $("feed").replaceChildren();
  $("toast").className = "toast";
  if (location.hash) history.replaceState(null, "", location.pathname);
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("login-token").focus();
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    await api("login", null, { token: $("login-token").value });
    $("login-token").value = "";
    start();
  } catch (err) {
    $("login-error").textContent = err.message;
  }
});

$("logout").addEventListener("click", async () => {
  try {
    await api("logout", null, {});
  } catch {}
  showLogin("You logged out.");
});

// ---- Routing: the address's hash says what main shows -----------------------------------

function go(params) {
  const h = "#" + new URLSearchParams(params);
  if (location.hash === h) route();
  else location.hash = h;
}

window.addEventListener("hashchange", () => route());

function route() {
  if (!state.session) return;
  const q = new URLSearchParams(location.hash.slice(1));
  if (state.editing && !(q.get("file") === state.editing.path && q.get("tab") === "edit")) state.editing = null;
  if (q.has("file")) return showFile(q.get("file"), q.get("tab") || "content", q.get("line"));
  if (q.has("dir")) return showDir(q.get("dir"));
  if (q.has("q")) return showSearch(q.get("q"));
  showHome();
}

// ---- Tree -------------------------------------------------------------------------------

async function loadTree() {
  try {
    const t = await api("tree");
    state.tree = t.root;
    $("tree-note").textContent = t.truncated ? "The memory holds more entries than are listed here." : "";
    renderTree();
  } catch (err) {
    failed(err);
  }
}

function findNode(p, n = state.tree) {
  if (!n) return null;
  if (n.path === p) return n;
  for (const c of n.children || []) {
    if (p === c.path || p.startsWith(c.path + "/")) return findNode(p, c);
  }
  return null;
}

function selectedPath() {
  const v = state.view;
  return v && (v.kind === "file" || v.kind === "dir") ? v.path : null;
}

function renderTree() {
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.path : null;
  const item = (n, level) => {
    const li = el("li", {
      role: "treeitem",
      "data-path": n.path,
      "aria-level": level,
      "aria-selected": String(n.path === selectedPath()),
      "aria-expanded": n.dir ? String(state.expanded.has(n.path)) : null,
      tabindex: "-1",
    });
    const row = el(
      "div",
      { class: "row", title: n.path },
      el("span", { class: "twisty", "aria-hidden": "true" }, n.dir ? (state.expanded.has(n.path) ? "▾" : "▸") : ""),
      el("span", { class: "name" + (n.name.startsWith(".") ? " hidden-name" : "") }, n.dir && n.path !== ROOT ? n.name + "/" : n.name),
      el("span", { class: "meta" }, size(n.size) + (n.changed ? " · " + ago(n.changed) : "")),
    );
    row.addEventListener("click", () => {
      if (n.dir && n.path !== ROOT) toggle(n.path, n.path === selectedPath() ? undefined : true);
      open(n);
    });
    li.append(row);
    if (n.dir && n.children && n.children.length) {
      li.append(el("ul", { role: "group" }, n.children.map((c) => item(c, level + 1))));
    }
    return li;
  };
  const tree = $("tree");
  tree.replaceChildren(state.tree ? item(state.tree, 1) : "");
  const items = visibleItems();
  const target = items.find((i) => i.dataset.path === focused) || items.find((i) => i.getAttribute("aria-selected") === "true") || items[0];
  if (target) target.tabIndex = 0;
  if (focused && target && target.dataset.path === focused && tree.contains(document.activeElement) === false) target.focus();
}

function open(n) {
  go(n.dir ? { dir: n.path } : { file: n.path });
}

function toggle(p, force) {
  const on = force === undefined ? !state.expanded.has(p) : force;
  if (on) state.expanded.add(p);
  else state.expanded.delete(p);
  renderTree();
}

function visibleItems() {
  return [...$("tree").querySelectorAll("li[role=treeitem]")].filter((li) => {
    for (let p = li.parentElement.closest("li[role=treeitem]"); p; p = p.parentElement.closest("li[role=treeitem]")) {
      if (p.getAttribute("aria-expanded") === "false") return false;
    }
    return true;
  });
}

// Keyboard: arrows move, Right/Left open and close folders, Enter opens, Home/End jump.
$("tree").addEventListener("keydown", (e) => {
  const items = visibleItems();
  const cur = e.target.closest("li[role=treeitem]");
  const i = items.indexOf(cur);
  if (i < 0) return;
  const p = cur.dataset.path;
  const n = findNode(p);
  const focus = (li) => {
    if (!li) return;
    items.forEach((x) => (x.tabIndex = -1));
    li.tabIndex = 0;
    li.focus();
  };
  switch (e.key) {
    case "ArrowDown":
      focus(items[i + 1]);
      break;
    case "ArrowUp":
      focus(items[i - 1]);
      break;
    case "Home":
      focus(items[0]);
      break;
    case "End":
      focus(items[items.length - 1]);
      break;
    case "ArrowRight":
      if (n && n.dir && !state.expanded.has(p)) {
        toggle(p, true);
        focus(visibleItems().find((x) => x.dataset.path === p));
      } else focus(items[i + 1]);
      break;
    case "ArrowLeft":
      if (n && n.dir && state.expanded.has(p) && p !== ROOT) {
        toggle(p, false);
        focus(visibleItems().find((x) => x.dataset.path === p));
      } else focus(items.find((x) => x.dataset.path === parentOf(p)));
      break;
    case "Enter":
    case " ":
      if (n) open(n);
      break;
    default:
      return;
  }
  e.preventDefault();
});

$("toggle-files").addEventListener("click", () => {
  const open = $("sidebar").classList.toggle("open");
  $("toggle-files").setAttribute("aria-expanded", String(open));
});

// ---- Main views ---------------------------------------------------------------------------

function setMain(...children) {
  const m = $("main");
  m.replaceChildren(...children);
  m.scrollTop = 0;
  $("sidebar").classList.remove("open");
  renderTree();
}

function crumbs(p) {
  const parts = p.split("/").filter(Boolean);
  const out = [];
  let acc = "";
  parts.forEach((part, i) => {
    acc += "/" + part;
    const target = acc;
    if (i > 0) out.push(" / ");
    if (i < parts.length - 1) {
      out.push(el("button", { class: "quiet small", onclick: () => go({ dir: target }) }, part));
    } else out.push(el("span", {}, part));
  });
  return el("div", { class: "crumbs" }, out);
}

function showHome() {
  state.view = { kind: "home" };
  const t = state.tree;
  let files = 0;
  const count = (n) => (n.dir ? (n.children || []).forEach(count) : files++);
  if (t) count(t);
  setMain(
    el("div", { class: "title-row" }, el("h1", {}, "What your agents remember")),
    el("p", { class: "facts" }, `${files} ${files === 1 ? "file" : "files"}, ${size(t ? t.size : 0)} in ${ROOT}` + (t && t.changed ? ", last changed " + ago(t.changed) : "")),
    el(
      "p",
      {},
      "Choose a file on the left to read it, see its versions and what each change did, edit it or put an earlier version back. " +
        "Search looks through every file. Activity, on the right, shows changes as agents make them.",
    ),
    state.session.history ? "" : el("p", { class: "banner" }, "This memory keeps no history: its versions cannot be shown or restored."),
  );
}

async function showFile(p, tab, line) {
  state.view = { kind: "file", path: p, tab };
  const head = (file, node) =>
    el(
      "div",
      {},
      crumbs(p),
      el(
        "div",
        { class: "title-row" },
        el("h1", {}, baseName(p)),
        fixed(p) || !file
          ? ""
          : el(
              "div",
              { class: "actions" },
              el("button", { id: "edit", type: "button", onclick: () => go({ file: p, tab: "edit" }), disabled: file.binary || null, title: "Edit (e)" }, "Edit"),
              el("button", { id: "delete", type: "button", class: "danger", onclick: () => deleteFile(p, file) }, "Delete"),
            ),
      ),
      el("p", { class: "facts" }, file ? size(file.size) + (node && node.changed ? " · changed " + ago(node.changed) : "") : ""),
      el(
        "div",
        { class: "tabs", role: "tablist" },
        [
          ["content", "Content"],
          ["history", "History"],
        ].map(([k, label]) =>
          el("button", { role: "tab", type: "button", id: "tab-" + k, "aria-selected": String(tab === k || (k === "content" && tab === "edit")), onclick: () => go({ file: p, tab: k }) }, label),
        ),
      ),
    );
  if (tab === "history") {
    setMain(head(null, findNode(p)), el("p", { class: "empty" }, "Loading…"));
    return showTimeline(p, head);
  }
  let file;
  try {
    file = await api("file", { path: p });
  } catch (err) {
    if (state.view.path !== p) return;
    setMain(
      crumbs(p),
      el("div", { class: "title-row" }, el("h1", {}, baseName(p))),
      el("p", { class: "banner warn" }, err.message),
      state.session.history ? el("button", { type: "button", onclick: () => go({ file: p, tab: "history" }) }, "See its history") : "",
    );
    return;
  }
  if (state.view.path !== p || state.view.tab !== tab) return;
  state.view.sha256 = file.sha256;
  if (tab === "edit" && !fixed(p) && !file.binary) {
    // An editor already open on this file keeps what the person typed: this load may be an
    // older one that ended after a refresh (a change elsewhere, a reconnect) loaded it again.
    if (state.editing && state.editing.path === p && $("editor")) return;
    return showEditor(p, file, head(file, findNode(p)));
  }
  setMain(head(file, findNode(p)), contentBlock(file, line));
  if (line) {
    const hit = $("main").querySelector(".line.hit");
    if (hit) hit.scrollIntoView({ block: "center" });
  }
}

function contentBlock(file, line) {
  if (file.binary) return el("p", { class: "binary-note" }, `This file is not UTF-8 text (${size(file.size)}); it is shown with replacement characters where it is not.`, contentLines(file.text));
  if (file.text === "") return el("p", { class: "empty" }, "This file is empty.");
  return contentLines(file.text, line);
}

function contentLines(text, hit) {
  const lines = text.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  const pre = el("pre", { class: "content", id: "content", tabindex: "0" });
  lines.forEach((l, i) => pre.append(el("span", { class: "line" + (hit && Number(hit) === i + 1 ? " hit" : "") }, l)));
  return pre;
}

function showEditor(p, file, head) {
  state.editing = { path: p, sha256: file ? file.sha256 : "", isNew: !file };
  const area = el("textarea", { class: "editor", id: "editor", spellcheck: "false", "aria-label": "Content of " + p });
  area.value = file ? file.text : "";
  const save = el("button", { id: "save", type: "button", class: "primary", onclick: () => saveFile(p, area.value) }, "Save");
  const cancel = el("button", { id: "cancel", type: "button", onclick: () => cancelEdit(p) }, "Cancel");
  area.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "s") {
      e.preventDefault();
      saveFile(p, area.value);
    }
    if (e.key === "Escape") cancelEdit(p);
  });
  setMain(
    head,
    el("div", { id: "edit-banner" }),
    area,
    el("div", { class: "actions" }, save, cancel, el("span", { class: "note" }, "Ctrl+S saves, Esc cancels. Saved as a new version by “web”.")),
  );
  area.focus();
}

function cancelEdit(p) {
  const wasNew = state.editing && state.editing.isNew;
  state.editing = null;
  if (wasNew) go({ dir: parentOf(p) });
  else go({ file: p });
}

async function saveFile(p, text) {
  const ed = state.editing;
  if (!ed) return;
  try {
    const res = await api("save", null, { path: p, text, sha256: ed.sha256 });
    state.editing = null;
    toast(res.changed ? `Saved ${baseName(p)} as version ${res.version || ""}`.trim() : "No change to save");
    await loadTree();
    go({ file: p });
  } catch (err) {
    const b = $("edit-banner");
    if (b) {
      b.replaceChildren(
        el(
          "div",
          { class: "banner warn", role: "alert" },
          err.message,
          err.status === 409 && !ed.isNew ? el("button", { type: "button", class: "small", onclick: () => reloadEditor(p) }, "Load the current version (your text is lost)") : "",
        ),
      );
    } else failed(err);
  }
}

async function reloadEditor(p) {
  state.editing = null;
  route();
}

async function deleteFile(p, file) {
  if (!(await confirmDialog(`Delete ${baseName(p)}?`, [el("p", {}, `${p} (${size(file.size)}) is deleted. The history keeps it: you can restore it from the activity or with memory-mcp restore.`)], "Delete", { danger: true }))) return;
  try {
    await api("delete", null, { path: p, sha256: file.sha256 });
    toast("Deleted " + p);
    await loadTree();
    go({ dir: parentOf(p) });
  } catch (err) {
    failed(err);
  }
}

async function deleteDir(p, node) {
  let files = 0;
  const count = (n) => (n.dir ? (n.children || []).forEach(count) : files++);
  count(node);
  if (!(await confirmDialog(`Delete ${baseName(p)}/ and everything in it?`, [el("p", {}, `${files} ${files === 1 ? "file" : "files"} (${size(node.size)}) below ${p} are deleted. The history keeps them.`)], "Delete", { danger: true }))) return;
  try {
    await api("delete", null, { path: p });
    toast("Deleted " + p);
    await loadTree();
    go({ dir: parentOf(p) });
  } catch (err) {
    failed(err);
  }
}

async function newFile(dir) {
  const input = el("input", { type: "text", id: "new-path", spellcheck: "false", "aria-label": "Path of the new file" });
  input.value = (dir === ROOT ? ROOT : dir) + "/";
  if (!(await confirmDialog("New file", [el("p", {}, "Path of the new file (directories are created as needed):")], "Create", { input }))) return;
  const p = input.value.trim().replace(/\/+$/, "");
  if (!p.startsWith(ROOT + "/")) return toast("A memory path starts with " + ROOT + "/", true);
  if (findNode(p)) return go({ file: p, tab: "edit" });
  state.view = { kind: "file", path: p, tab: "edit" };
  history.replaceState(null, "", "#" + new URLSearchParams({ file: p, tab: "edit" }));
  showEditor(p, null, el("div", {}, crumbs(p), el("div", { class: "title-row" }, el("h1", {}, baseName(p) + " (new)"))));
}

$("new-file").addEventListener("click", () => newFile(state.view && state.view.kind === "dir" ? state.view.path : ROOT));

// ---- History: a timeline of versions, diffs, restore ---------------------------------------

function describe(v) {
  switch (v.kind) {
    case "moved":
      return `moved ${v.path} → ${v.new_path}`;
    case "deleted":
      return `deleted ${v.path}`;
    default:
      return `${v.kind} ${v.path} (${size(v.size)})`;
  }
}

async function showTimeline(p, head) {
  let versions;
  try {
    versions = (await api("log", { path: p })).versions;
  } catch (err) {
    if (state.view.path === p) setMain(head(null, findNode(p)), el("p", { class: "banner warn" }, err.message));
    return;
  }
  if (state.view.path !== p || state.view.tab !== "history") return;
  if (!versions.length) {
    setMain(head(null, findNode(p)), el("p", { class: "empty" }, "The history holds no version of this file."));
    return;
  }
  const list = el("ol", { class: "versions", id: "versions", "aria-label": "Versions, newest first" });
  const detail = el("div", { id: "version-detail" });
  const select = (v) => {
    list.querySelectorAll("li").forEach((li) => li.setAttribute("aria-selected", String(li.dataset.seq === String(v.seq))));
    showVersion(p, v, versions, detail);
  };
  versions.forEach((v) => {
    list.append(
      el(
        "li",
        { "data-seq": v.seq, "aria-selected": "false" },
        el(
          "button",
          { type: "button", onclick: () => select(v) },
          el("div", { class: "v-head" }, el("span", { class: "v-seq" }, "#" + v.seq), when(v.time)),
          el("div", { class: "v-what" }, el("span", { class: "actor" }, v.actor), " · ", v.command || "change", " · ", describe(v), v.redacted ? " · redacted" : "", via(v)),
        ),
      ),
    );
  });
  setMain(head(null, findNode(p)), el("div", { class: "timeline-grid" }, list, detail));
  select(versions[0]);
}

async function showVersion(p, v, versions, detail) {
  const others = versions.filter((o) => o.seq !== v.seq);
  const compare = el("select", { id: "compare", "aria-label": "Compare with" }, el("option", { value: "" }, "the version before it"), others.map((o) => el("option", { value: o.seq }, `#${o.seq} · ${new Date(o.time).toLocaleString()} · ${o.actor}`)));
  const diffBox = el("div", { id: "diff-box" });
  const loadDiff = async () => {
    const params = { path: p };
    if (compare.value) {
      const [a, b] = [Number(compare.value), v.seq].sort((x, y) => x - y);
      Object.assign(params, { a, b });
    } else params.a = v.seq;
    diffBox.replaceChildren(el("p", { class: "empty" }, "Loading…"));
    try {
      const d = await api("diff", params);
      diffBox.replaceChildren(renderDiff(d.diff));
    } catch (err) {
      diffBox.replaceChildren(el("p", { class: "banner warn" }, err.message));
    }
  };
  compare.addEventListener("change", loadDiff);
  const target = v.kind === "moved" && v.new_path !== p ? v.new_path : p;
  const actions = el("div", { class: "actions" });
  if (v.kind !== "deleted" && !v.redacted) {
    actions.append(el("button", { type: "button", onclick: () => viewVersion(target, v) }, "View this version"));
  }
  if (!fixed(p)) {
    actions.append(el("button", { id: "restore-version", type: "button", class: "primary", onclick: () => restore(p, v) }, "Restore this version…"));
  }
  detail.replaceChildren(
    el("div", { class: "title-row" }, el("h2", {}, `Version #${v.seq}`), actions),
    el("p", { class: "facts" }, `${new Date(v.time).toLocaleString()} by ${v.actor} (${v.command || "change"}): ${describe(v)}${via(v)}`),
    el("div", { class: "compare" }, el("label", { for: "compare" }, "Changes against"), compare),
    diffBox,
  );
  loadDiff();
}

function renderDiff(text) {
  if (!text) return el("p", { class: "empty" }, "No difference in content.");
  const pre = el("pre", { class: "diff", id: "diff", tabindex: "0" });
  for (const line of text.replace(/\n$/, "").split("\n")) {
    let cls = "dl";
    if (line.startsWith("+++") || line.startsWith("---")) cls += " meta";
    else if (line.startsWith("@@")) cls += " hunk";
    else if (line.startsWith("+")) cls += " add";
    else if (line.startsWith("-")) cls += " del";
    pre.append(el("span", { class: cls }, line));
  }
  return pre;
}

async function viewVersion(p, v) {
  try {
    const f = await api("show", { path: p, seq: v.seq });
    await confirmDialog(`${baseName(p)} after version #${v.seq}`, [contentBlock(f)], "Close");
  } catch (err) {
    failed(err);
  }
}

// restore puts path back as it was after version v (or, for the whole memory, at a time).
async function restore(p, v, at) {
  const what = at ? `${p} as it was at ${at.toLocaleString()}` : `${p} as it was after version #${v.seq}`;
  const body = [el("p", {}, `Put ${what}? Every file below it that changed since is put back; the restore is itself a new version, so it can be undone the same way.`)];
  if (!(await confirmDialog("Restore?", body, "Restore", { danger: true }))) return;
  try {
    const res = await api("restore", null, at ? { path: p, at: at.toISOString() } : { path: p, seq: v.seq });
    const all = [res, ...(res.Mounts || [])].filter((r) => r.Version); // the whole memory: its mounts too
    if (!all.length) toast("Nothing to restore: it is already so.");
    else {
      const n = all.reduce((n, r) => n + (r.Created || []).length + (r.Modified || []).length + (r.Deleted || []).length, 0);
      toast(`Restored ${n} ${n === 1 ? "file" : "files"} as ${all.map((r) => (r.Top ? r.Top + " " : "") + "version #" + r.Version).join(", ")}`);
    }
    await loadTree();
    route();
  } catch (err) {
    failed(err);
  }
}

$("restore-all").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("restore-at").value;
  if (!v) return;
  restore(ROOT, null, new Date(v));
});

// ---- Directories and search -----------------------------------------------------------------

async function showDir(p) {
  state.view = { kind: "dir", path: p };
  state.expanded.add(p);
  const node = findNode(p);
  if (!node || !node.dir) {
    setMain(crumbs(p), el("p", { class: "banner warn" }, p + " does not exist (any more)."));
    return;
  }
  const list = el("ul", { class: "listing", id: "listing" });
  for (const c of node.children || []) {
    list.append(el("li", {}, el("button", { type: "button", title: c.path, onclick: () => open(c) }, el("span", { class: "grow" }, c.dir ? c.name + "/" : c.name), el("span", { class: "meta" }, size(c.size) + (c.changed ? " · " + ago(c.changed) : "")))));
  }
  const actions = el("div", { class: "actions" });
  if (!fixed(p)) {
    actions.append(el("button", { type: "button", onclick: () => newFile(p) }, "New file here"));
    if (p !== ROOT && !mountAt(p)) actions.append(el("button", { type: "button", class: "danger", onclick: () => deleteDir(p, node) }, "Delete…"));
  }
  const versions = el("div", { id: "dir-history" });
  setMain(
    crumbs(p),
    el("div", { class: "title-row" }, el("h1", {}, p === ROOT ? ROOT : baseName(p) + "/"), actions),
    el("p", { class: "facts" }, `${plural((node.children || []).length, "entry", "entries")} · ${size(node.size)}` + (node.changed ? " · changed " + ago(node.changed) : "")),
    node.children && node.children.length ? list : el("p", { class: "empty" }, "This directory is empty."),
    state.session.history ? el("h2", { class: "section" }, "Recent changes below it") : "",
    versions,
  );
  if (!state.session.history) return;
  try {
    const vs = (await api("log", { path: p, n: 30 })).versions;
    if (state.view.path !== p) return;
    const ol = el("ol", { class: "versions" });
    for (const v of vs) {
      ol.append(
        el(
          "li",
          {},
          el(
            "div",
            { class: "v-row" },
            el("button", { type: "button", title: "Put this directory back as it was after this version", onclick: () => (fixed(p) ? go({ file: v.new_path || v.path, tab: "history" }) : restore(p, v)) },
              el("div", { class: "v-head" }, el("span", { class: "v-seq" }, "#" + v.seq), when(v.time)),
              el("div", { class: "v-what" }, el("span", { class: "actor" }, v.actor), " · ", describe(v), via(v))),
          ),
        ),
      );
    }
    versions.replaceChildren(vs.length ? ol : el("p", { class: "empty" }, "No changes recorded."), vs.length && !fixed(p) ? el("p", { class: "note" }, "Choose a change to put the directory back as it was after it.") : "");
  } catch (err) {
    versions.replaceChildren(el("p", { class: "note" }, err.message));
  }
}

$("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const q = $("search").value.trim();
  if (q) go({ q });
});

async function showSearch(q) {
  state.view = { kind: "search", q };
  $("search").value = q;
  setMain(el("div", { class: "title-row" }, el("h1", {}, "Search")), el("p", { class: "empty" }, "Searching…"));
  let res;
  try {
    res = await api("search", { q });
  } catch (err) {
    setMain(el("div", { class: "title-row" }, el("h1", {}, "Search")), el("p", { class: "banner warn" }, err.message));
    return;
  }
  if (state.view.kind !== "search" || state.view.q !== q) return;
  const list = el("ul", { class: "listing", id: "results" });
  for (const m of res.matches) {
    list.append(
      el(
        "li",
        {},
        el(
          "button",
          { type: "button", onclick: () => go(m.line ? { file: m.path, line: m.line } : { file: m.path }) },
          el("span", { class: "grow" }, m.path, el("span", { class: "snippet" }, highlight(m.text, q))),
          el("span", { class: "line-no" }, m.line ? "line " + m.line : "name"),
        ),
      ),
    );
  }
  const n = res.matches.length;
  setMain(
    el("div", { class: "title-row" }, el("h1", {}, "Search")),
    el("p", { class: "facts" }, n ? `${n}${res.more ? "+" : ""} ${n === 1 ? "match" : "matches"} for “${q}”` + (res.more ? " (the first ones shown)" : "") : `Nothing matches “${q}”.`),
    n ? list : "",
  );
}

// highlight marks the matches of q in text, as text nodes and <mark> elements.
function highlight(text, q) {
  const out = [];
  const lower = text.toLowerCase();
  const needle = q.toLowerCase();
  let i = 0;
  for (let at = lower.indexOf(needle); at >= 0 && needle; at = lower.indexOf(needle, at + needle.length)) {
    out.push(text.slice(i, at), el("mark", {}, text.slice(at, at + needle.length)));
    i = at + needle.length;
  }
  out.push(text.slice(i));
  return out;
}

// ---- Activity: the history's recent versions, then the change feed live ----------------------

async function loadFeed() {
  if (!state.session.history) {
    state.feed = [];
    renderFeed();
    return;
  }
  try {
    const vs = (await api("log", { n: 50 })).versions;
    // A change is a version of one store: the main store's and each mount's are numbered apart.
    const byVersion = new Map();
    for (const v of vs) {
      const m = (state.session.mounts || []).find((m) => v.path === m.path || v.path.startsWith(m.path + "/"));
      const key = (m ? m.path : "") + "#" + v.seq;
      const e = byVersion.get(key) || { seq: v.seq, time: v.time, actor: v.actor, command: v.command, changes: [] };
      e.changes.push({ kind: v.kind, path: v.new_path || v.path, from: v.new_path ? v.path : "" });
      byVersion.set(key, e);
    }
    state.feed = [...byVersion.values()];
    renderFeed();
  } catch (err) {
    failed(err);
  }
}

function renderFeed(fresh) {
  const ol = $("feed");
  ol.replaceChildren(
    ...state.feed.slice(0, 100).map((e) => {
      const c = e.changes[0] || { kind: "changed", path: ROOT };
      const more = e.changes.length > 1 ? ` and ${e.changes.length - 1} more` : "";
      return el(
        "li",
        { class: e === fresh ? "fresh" : null },
        el(
          "button",
          { type: "button", onclick: () => go(c.kind === "deleted" || c.kind === "changed" ? { dir: c.kind === "changed" ? ROOT : parentOf(c.path) } : { file: c.path, tab: "history" }) },
          el("div", { class: "what", title: c.from ? `${c.from} → ${c.path}` : c.path }, el("span", { class: "kind " + c.kind }, c.kind), el("span", { class: "actor" }, e.actor), " ", c.from ? [pathText(c.from), " → ", pathText(c.path)] : pathText(c.path), more),
          el("div", { class: "when" }, e.seq ? "#" + e.seq + " · " : "", e.command ? e.command + " · " : "", when(e.time)),
        ),
      );
    }),
  );
  if (!state.feed.length) ol.append(el("li", { class: "note" }, "No changes yet. They appear here as agents make them."));
}

// connect opens the live stream of changes; the browser reconnects by itself after a drop.
function connect() {
  if (state.events) state.events.close();
  const es = new EventSource("api/events");
  state.events = es;
  es.addEventListener("hello", () => $("live").classList.add("on"));
  es.addEventListener("error", () => {
    $("live").classList.remove("on");
    if (es.readyState === EventSource.CLOSED) setTimeout(() => state.session && start(), 3000);
  });
  es.addEventListener("resync", () => refresh(true));
  es.addEventListener("change", (ev) => {
    const b = JSON.parse(ev.data);
    if (b.external) {
      // Another process changed the memory: what exactly, its history says.
      loadFeed();
    } else {
      const e = { seq: b.version, time: b.time, actor: b.actor, command: b.command, changes: b.changes.map((c) => ({ kind: c.kind, path: c.path, from: c.from || "" })) };
      state.feed.unshift(e);
      renderFeed(e);
    }
    refresh(false, b);
  });
}

let refreshTimer;
function refresh(all, batch) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    if (all) await loadFeed();
    await loadTree();
    const v = state.view;
    if (!v) return;
    const touched = !batch || batch.external || batch.changes.some((c) => [c.path, c.from].some((x) => x && (x === v.path || (v.kind === "dir" && x.startsWith(v.path + "/")))));
    if (state.editing) {
      if (touched && state.editing.path === v.path) {
        const b = $("edit-banner");
        if (b && !b.childElementCount) b.append(el("div", { class: "banner warn", role: "alert" }, `${v.path} was changed${batch && batch.actor ? " by " + batch.actor : ""} while you edit it. Saving will be refused; copy your text, then reload.`));
      }
      return;
    }
    if (v.kind === "home" || ((v.kind === "file" || v.kind === "dir") && touched)) route();
  }, 250);
}

// ---- Keys -------------------------------------------------------------------------------------

document.addEventListener("keydown", (e) => {
  const t = e.target;
  const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement;
  if (typing || e.ctrlKey || e.metaKey || e.altKey || $("dialog").open || !state.session) return;
  if (e.key === "/") {
    e.preventDefault();
    $("search").focus();
    $("search").select();
  } else if (e.key === "e" && state.view && state.view.kind === "file" && !fixed(state.view.path) && $("edit")) {
    e.preventDefault();
    go({ file: state.view.path, tab: "edit" });
  } else if (e.key === "g") {
    e.preventDefault();
    const sel = $("tree").querySelector("li[tabindex='0']");
    if (sel) sel.focus();
  }
});

start();
