// reactbot's Memory panel: what the bot keeps about this session (GET /api/memory), each
// with a Delete button (POST /api/memory/forget) and Delete all (POST /api/memory/clear),
// every POST with the page's CSRF token. A memory's text is anyone's text: it is set with
// textContent, never parsed as HTML, and never made a link.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const panel = document.getElementById("memory");
  const opener = document.getElementById("memory-open");
  const said = document.getElementById("memory-said");
  const list = document.getElementById("memory-list");
  const clear = document.getElementById("memory-clear");
  const log = document.getElementById("log");
  let loading = null;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  async function call(method, path, body) {
    const options = { method: method, credentials: "same-origin" };
    if (method === "POST") {
      options.headers = { "X-CSRF-Token": csrf, "Content-Type": "application/json" };
      options.body = JSON.stringify(body || {});
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (e) {
      return { ok: false, data: { error: "The chat did not answer: check the connection." } };
    }
    let data = {};
    try { data = await response.json(); } catch (e) { data = {}; }
    return { ok: response.ok, data: data };
  }

  function day(at) {
    const when = new Date(Number(at) * 1000);
    if (isNaN(when.getTime())) return "";
    return when.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
  }

  function row(memory) {
    const li = el("li", "memory-item");
    li.dataset.id = String(memory.id);
    const body = el("div", "memory-body");
    body.appendChild(el("span", "memory-text", String(memory.text)));
    body.appendChild(el("span", "memory-meta", [memory.id, memory.scope, day(memory.at)].join(" · ")));
    li.appendChild(body);
    const del = el("button", "memory-delete", "Delete");
    del.type = "button";
    del.setAttribute("aria-label", "Delete memory " + memory.id);
    del.addEventListener("click", async function () {
      del.disabled = true;
      const r = await call("POST", "/api/memory/forget", { id: memory.id });
      if (r.ok && r.data.ok) {
        li.remove();
        said.textContent = r.data.text || "";
        clear.hidden = list.children.length === 0;
      } else {
        del.disabled = false;
        said.textContent = r.data.text || r.data.error || "That memory could not be deleted.";
      }
    });
    li.appendChild(del);
    return li;
  }

  function show(data) {
    list.replaceChildren();
    clear.dataset.confirm = "";
    clear.textContent = "Delete all";
    if (data.enabled === false) {
      said.textContent = data.text || "";
      clear.hidden = true;
      return;
    }
    const found = Array.isArray(data.memories) ? data.memories : [];
    found.forEach(function (m) { list.appendChild(row(m)); });
    said.textContent = String(data.text || "");
    clear.hidden = found.length === 0;
  }

  function load() {
    if (loading) return loading;
    loading = call("GET", "/api/memory").then(function (r) {
      loading = null;
      if (r.ok) show(r.data); else said.textContent = r.data.error || "The memories could not be read.";
    });
    return loading;
  }

  function toggle(open) {
    panel.hidden = !open;
    opener.setAttribute("aria-expanded", String(open));
    if (open) load(); else opener.focus();
  }

  opener.addEventListener("click", function () { toggle(panel.hidden); });
  document.getElementById("memory-close").addEventListener("click", function () { toggle(false); });
  clear.addEventListener("click", async function () {
    if (clear.dataset.confirm !== "yes") {
      clear.dataset.confirm = "yes";
      clear.textContent = "Delete all: sure?";
      return;
    }
    clear.dataset.confirm = "";
    clear.textContent = "Delete all";
    clear.disabled = true;
    const r = await call("POST", "/api/memory/clear", {});
    clear.disabled = false;
    if (r.ok) await load();
    said.textContent = r.data.text || r.data.error || "";
  });
  // A finished answer may have remembered or forgotten something: an open panel re-reads.
  new MutationObserver(function (changes) {
    if (panel.hidden) return;
    const ended = changes.some(function (c) {
      return Array.from(c.addedNodes).some(function (n) {
        return n.nodeType === 1 && (n.matches(".footer") || n.querySelector(".footer"));
      });
    });
    if (ended) load();
  }).observe(log, { childList: true, subtree: true });
})();
