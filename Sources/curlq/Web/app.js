// The curlq daemon's page: a client of aria2's JSON-RPC 2.0 (the daemon's `/jsonrpc`, or any
// aria2c with --enable-rpc). WebSocket first, HTTP POST while it is down; the queue is polled
// every second and refreshed at once on each aria2.onDownload* notification. No framework, no
// build step, nothing from another origin; every text from the server goes in as textContent.
"use strict";

const POLL_MS = 1000;
const CALL_TIMEOUT_MS = 15000;
// The secret is kept per endpoint: a link whose ?rpc= names another server gets none of it.
const SECRET_KEY = "curlq-rpc-secret ";
const KEYS = ["gid", "status", "totalLength", "completedLength", "downloadSpeed", "files",
              "errorCode", "errorMessage"];
// Where each aria2 status is shown (aria2's `removed` is a cancelled download).
const SECTION = { active: "active", waiting: "waiting", paused: "paused", complete: "done",
                  error: "failed", removed: "removed" };
// What each status is called on the page.
const WORDS = { active: "running", waiting: "waiting", paused: "paused", complete: "done",
                error: "failed", removed: "cancelled" };
// The buttons each status offers.
const ACTIONS = {
  active: ["pause", "remove"],
  waiting: ["pause", "first", "up", "down", "remove"],
  paused: ["unpause", "first", "up", "down", "remove"],
  complete: ["clear"], error: ["clear"], removed: ["clear"],
};
const LABELS = { pause: "Pause", unpause: "Resume", first: "Move to the front of the queue",
                 up: "Move up the queue", down: "Move down the queue", remove: "Cancel",
                 clear: "Clear from the list" };

// The endpoint: `jsonrpc` beside the page (the daemon's /jsonrpc; under a proxy's prefix too),
// or `?rpc=http://HOST:PORT/jsonrpc` (development against another server). Only an http(s)
// URL is taken; a secret never goes in the page's URL.
function endpoint() {
  const given = new URLSearchParams(location.search).get("rpc");
  if (given) {
    try {
      const url = new URL(given, location.href);
      if (url.protocol === "http:" || url.protocol === "https:") {
        url.username = "";
        url.password = "";
        return url;
      }
    } catch (error) { /* fall through to the same origin */ }
  }
  return new URL("jsonrpc", location.href);
}

// JSON-RPC over a WebSocket when one is open, else over HTTP POST; reconnects the socket.
class RPC {
  constructor(url, onNotification, onTransport) {
    this.httpURL = url.href;
    const ws = new URL(url.href);
    ws.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    this.wsURL = ws.href;
    this.onNotification = onNotification;
    this.onTransport = onTransport;
    this.socket = null;
    this.pending = new Map();
    this.nextID = 1;
    this.retryMs = 1000;
    this.secret = "";
  }

  get transport() { return this.socket ? "WebSocket" : "HTTP"; }

  connect() {
    let socket;
    try {
      socket = new WebSocket(this.wsURL);
    } catch (error) {
      this.scheduleReconnect();
      return;
    }
    socket.onopen = () => {
      this.socket = socket;
      this.retryMs = 1000;
      this.onTransport();
    };
    socket.onmessage = (event) => this.received(event.data);
    socket.onclose = () => {
      const wasOpen = this.socket === socket;
      if (wasOpen) this.socket = null;
      for (const [id, call] of this.pending) {
        if (call.socket === socket) {
          this.pending.delete(id);
          call.reject(new Error("the WebSocket closed"));
        }
      }
      if (wasOpen) this.onTransport();
      this.scheduleReconnect();
    };
  }

  scheduleReconnect() {
    setTimeout(() => this.connect(), this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, 30000);
  }

  received(text) {
    let message;
    try { message = JSON.parse(text); } catch (error) { return; }
    if (message.method && message.id === undefined) {
      this.onNotification(message.method, message.params);
      return;
    }
    const call = this.pending.get(String(message.id));
    if (!call) return;
    this.pending.delete(String(message.id));
    clearTimeout(call.timer);
    if (message.error) call.reject(new RPCError(message.error));
    else call.resolve(message.result);
  }

  // Calls `aria2.METHOD` with the secret (aria2's `token:SECRET`) before `params`.
  call(method, params = []) {
    const id = String(this.nextID++);
    const all = this.secret ? ["token:" + this.secret, ...params] : params;
    const request = JSON.stringify({ jsonrpc: "2.0", id, method: "aria2." + method, params: all });
    const socket = this.socket;
    if (socket && socket.readyState === WebSocket.OPEN) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new Error("no answer in " + CALL_TIMEOUT_MS / 1000 + " s"));
        }, CALL_TIMEOUT_MS);
        this.pending.set(id, { resolve, reject, timer, socket });
        socket.send(request);
      });
    }
    return this.post(request);
  }

  async post(request) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), CALL_TIMEOUT_MS);
    try {
      const response = await fetch(this.httpURL, {
        method: "POST", body: request, signal: controller.signal,
        headers: { "Content-Type": "application/json" }, credentials: "omit", cache: "no-store",
      });
      let message;
      try { message = await response.json(); } catch (error) {
        throw new Error("HTTP " + response.status + " without a JSON-RPC answer");
      }
      if (message.error) throw new RPCError(message.error);
      return message.result;
    } finally {
      clearTimeout(timer);
    }
  }
}

class RPCError extends Error {
  constructor(error) {
    super(error.message || "error " + error.code);
    this.code = error.code;
  }
  get unauthorized() { return this.message === "Unauthorized"; }
}

// Formatting ------------------------------------------------------------------------------

function bytes(count) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(count) || 0;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return (unit === 0 ? value.toFixed(0) : value.toFixed(1)) + " " + units[unit];
}

function duration(seconds) {
  seconds = Math.ceil(seconds);
  if (seconds < 60) return seconds + " s";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes + " min " + (seconds % 60) + " s";
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return hours + " h " + (minutes % 60) + " min";
  return Math.floor(hours / 24) + " d";
}

// The file's name: its path's last part, else its first URI's, else the GID.
function nameOf(download) {
  const file = (download.files || [])[0] || {};
  const path = file.path || "";
  if (path) return path.split("/").pop();
  const uri = ((file.uris || [])[0] || {}).uri;
  if (uri) {
    try { return decodeURIComponent(new URL(uri).pathname.split("/").pop()) || uri; } catch (e) { return uri; }
  }
  return download.gid;
}

function figures(download) {
  const total = Number(download.totalLength) || 0;
  const done = Number(download.completedLength) || 0;
  const speed = Number(download.downloadSpeed) || 0;
  const size = total > 0 ? bytes(done) + " of " + bytes(total) : bytes(done);
  switch (download.status) {
    case "active": {
      const parts = [size];
      if (total > 0) parts.push(Math.floor((done / total) * 100) + " %");
      parts.push(bytes(speed) + "/s");
      if (total > 0 && speed > 0) parts.push(duration((total - done) / speed) + " left");
      else parts.push("time left unknown");
      return parts.join(" · ");
    }
    case "complete": return bytes(total || done);
    case "removed": return "cancelled at " + size;
    default:
      if (total === 0 && done === 0) return download.status === "error" ? "" : "not started";
      return total > 0 ? size + " · " + Math.floor((done / total) * 100) + " %" : size;
  }
}

// The page --------------------------------------------------------------------------------

const page = {
  rpc: null,
  items: new Map(),   // gid → its <li>
  refreshing: false,
  again: false,
  problem: "",
};

function showConnection() {
  const line = document.getElementById("connection");
  if (page.problem) {
    line.textContent = page.problem;
    line.dataset.state = "error";
  } else {
    line.textContent = "Connected over " + page.rpc.transport;
    line.dataset.state = page.rpc.transport.toLowerCase();
  }
}

function notice(text) {
  document.getElementById("add-result").textContent = text;
}

// Asks for the three lists and shows them; a call made while one runs runs once after it.
async function refresh() {
  if (page.refreshing) { page.again = true; return; }
  page.refreshing = true;
  try {
    const [active, waiting, stopped] = await Promise.all([
      page.rpc.call("tellActive", [KEYS]),
      page.rpc.call("tellWaiting", [0, 1000, KEYS]),
      page.rpc.call("tellStopped", [0, 1000, KEYS]),
    ]);
    page.problem = "";
    render([...active, ...waiting, ...stopped.slice().reverse()]);
  } catch (error) {
    page.problem = error instanceof RPCError && error.unauthorized
      ? "The RPC secret is missing or wrong: enter it below."
      : "Cannot reach " + page.rpc.httpURL + ": " + error.message;
  } finally {
    page.refreshing = false;
    showConnection();
    if (page.again) { page.again = false; refresh(); }
  }
}

function render(downloads) {
  const lists = {};
  for (const section of document.querySelectorAll("#queue section.state")) {
    lists[section.id] = [];
  }
  const seen = new Set();
  for (const download of downloads) {
    const section = SECTION[download.status];
    if (!section || seen.has(download.gid)) continue;
    seen.add(download.gid);
    let item = page.items.get(download.gid);
    if (!item) {
      item = document.getElementById("download-template").content.firstElementChild.cloneNode(true);
      item.dataset.gid = download.gid;
      page.items.set(download.gid, item);
    }
    update(item, download);
    lists[section].push(item);
  }
  for (const [gid, item] of page.items) {
    if (!seen.has(gid)) { item.remove(); page.items.delete(gid); }
  }
  for (const [id, items] of Object.entries(lists)) {
    const section = document.getElementById(id);
    const list = section.querySelector("ol");
    items.forEach((item, index) => {
      if (list.children[index] !== item) list.insertBefore(item, list.children[index] || null);
    });
    section.querySelector(".count").textContent = "(" + items.length + ")";
    section.dataset.empty = items.length === 0 ? "true" : "false";
  }
  const active = lists.active.length;
  document.title = (active ? active + " active · " : "") + "curlq daemon";
}

function update(item, download) {
  const name = nameOf(download);
  const total = Number(download.totalLength) || 0;
  const done = Number(download.completedLength) || 0;
  item.dataset.status = download.status;
  item.querySelector(".name").textContent = name;
  item.querySelector(".status").textContent = WORDS[download.status] || download.status;
  const bar = item.querySelector("progress");
  bar.setAttribute("aria-label", "Progress of " + name);
  if (total > 0) bar.value = Math.min(100, (done / total) * 100);
  else if (download.status === "complete") bar.value = 100;
  else if (download.status === "active") bar.removeAttribute("value");  // running, its size not known yet
  else bar.value = 0;
  item.querySelector(".figures").textContent = figures(download);
  const reason = item.querySelector(".reason");
  reason.textContent = download.status === "error"
    ? (download.errorMessage || "failed") + (download.errorCode ? " (error " + download.errorCode + ")" : "")
    : "";
  reason.hidden = reason.textContent === "";
  const offered = ACTIONS[download.status] || [];
  for (const button of item.querySelectorAll("button[data-action]")) {
    button.hidden = !offered.includes(button.dataset.action);
    button.setAttribute("aria-label", LABELS[button.dataset.action] + ": " + name);
  }
}

async function act(action, gid) {
  const calls = {
    pause: () => page.rpc.call("pause", [gid]),
    unpause: () => page.rpc.call("unpause", [gid]),
    remove: () => page.rpc.call("remove", [gid]),
    first: () => page.rpc.call("changePosition", [gid, 0, "POS_SET"]),
    up: () => page.rpc.call("changePosition", [gid, -1, "POS_CUR"]),
    down: () => page.rpc.call("changePosition", [gid, 1, "POS_CUR"]),
    clear: () => page.rpc.call("removeDownloadResult", [gid]),
  };
  if (!calls[action]) return;
  try {
    await calls[action]();
  } catch (error) {
    notice(LABELS[action] + " failed: " + error.message);
  }
  refresh();
}

async function add(event) {
  event.preventDefault();
  const field = document.getElementById("uris");
  const uris = field.value.split("\n").map((line) => line.trim()).filter((line) => line);
  if (uris.length === 0) return;
  const position = document.getElementById("position").value.trim();
  let added = 0;
  try {
    for (const [index, uri] of uris.entries()) {
      const params = [[uri], {}];
      if (position !== "") params.push(Number(position) + index);
      await page.rpc.call("addUri", params);
      added += 1;
    }
    field.value = "";
    notice(added === 1 ? "Added 1 download." : "Added " + added + " downloads.");
  } catch (error) {
    notice("Added " + added + " of " + uris.length + "; " + uris[added] + ": " + error.message);
  }
  refresh();
}

function start() {
  const url = endpoint();
  document.getElementById("endpoint").textContent = url.href
    + (url.origin === location.origin ? "" : " (not this page's server)");
  page.rpc = new RPC(url, () => refresh(), () => showConnection());
  page.rpc.secret = sessionStorage.getItem(SECRET_KEY + url.href) || "";
  document.getElementById("secret").value = page.rpc.secret;
  document.getElementById("secret-form").addEventListener("submit", (event) => {
    event.preventDefault();
    page.rpc.secret = document.getElementById("secret").value;
    sessionStorage.setItem(SECRET_KEY + url.href, page.rpc.secret);
    refresh();
  });
  document.getElementById("add-form").addEventListener("submit", add);
  document.getElementById("queue").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    const item = button && button.closest("li[data-gid]");
    if (item) act(button.dataset.action, item.dataset.gid);
  });
  page.rpc.connect();
  refresh();
  // No polling while the tab is hidden; a look at once when it shows again.
  setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
}

start();
