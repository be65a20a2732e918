// reactbot's web chat. Every piece of text from the bot, a model, a tool or a person is set
// with textContent: nothing is ever parsed as HTML. Links are made only from http(s) URLs.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  // The buttons' words, the same on every surface (adapters/words.py BUTTONS).
  const LABELS = JSON.parse(document.body.dataset.labels);
  const log = document.getElementById("log");
  const form = document.getElementById("ask");
  const box = document.getElementById("question");
  const statusLine = document.getElementById("status");
  const errorLine = document.getElementById("error");
  const empty = document.getElementById("empty");
  const verbosity = document.getElementById("verbosity");
  const messages = new Map(); // run id -> { item, data }
  let events = null;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function field(value) {
    if (!value) return "";
    return value.cut ? value.text + " … (+" + value.cut.toLocaleString() + " chars)" : value.text;
  }

  const link = window.reactbotLink;
  const markdown = window.reactbotMarkdown;

  function showError(text) {
    errorLine.textContent = text;
    errorLine.hidden = !text;
  }

  // A FormData body (a question with files) is sent as the browser encodes it; anything
  // else as JSON. Both carry the CSRF token.
  async function post(path, body) {
    const form = body instanceof FormData;
    const headers = { "X-CSRF-Token": csrf };
    if (!form) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method: "POST",
      headers: headers,
      body: form ? body : JSON.stringify(body || {}),
      credentials: "same-origin",
    });
    let data = {};
    try {
      data = await response.json();
    } catch (e) {
      data = {};
    }
    if (!response.ok) showError(data.error || "Something went wrong (" + response.status + ").");
    return { ok: response.ok, data: data };
  }

  // ---- one exchange: the question and the bot's message ----------------------------------
  function item(key, question) {
    let entry = messages.get(key);
    if (entry) return entry;
    const li = el("li", "turn");
    li.appendChild(el("p", "question", question));
    const message = el("article", "message");
    message.setAttribute("aria-label", "reactbot's answer");
    li.appendChild(message);
    log.appendChild(li);
    empty.hidden = true;
    entry = { li: li, message: message, data: null };
    messages.set(key, entry);
    return entry;
  }

  function drawStep(step) {
    const part = el("section", "step" + (step.error ? " failed" : ""));
    part.appendChild(el("h3", "step-head", "Step " + step.n + (step.call ? "." + (step.call + 1) : "")));
    if (step.thought && step.thought.text) {
      const t = el("div", "thought");
      t.appendChild(el("span", "label", "Thought"));
      t.appendChild(el("span", "text", field(step.thought)));
      part.appendChild(t);
    }
    if (step.action) {
      const a = el("div", "action");
      a.appendChild(el("span", "label", "Action"));
      a.appendChild(el("code", "tool", step.action));
      if (step.input) a.appendChild(el("code", "input", field(step.input)));
      part.appendChild(a);
    }
    if (step.approval) part.appendChild(el("div", "decided", step.approval));
    if (step.observation) {
      const o = el("div", "observation");
      o.appendChild(el("span", "label", "Observation"));
      o.appendChild(el("pre", "text", field(step.observation)));
      part.appendChild(o);
    }
    return part;
  }

  function drawPending(data, message) {
    const p = data.pending;
    const box = el("section", "pending");
    box.setAttribute("aria-label", "An action waits for your decision");
    box.appendChild(el("p", "ask", "✋ The bot wants to run " + p.tool + ". Allow it?"));
    box.appendChild(el("code", "input", field(p.input)));
    const row = el("div", "buttons");
    const editor = el("textarea", "edit");
    editor.value = p.input.text;
    editor.hidden = true;
    editor.setAttribute("aria-label", "The input to run instead");
    const reason = el("input", "reason");
    reason.placeholder = "Why not? (optional, the model reads it)";
    reason.setAttribute("aria-label", "Reason for denying");
    reason.hidden = true;
    function decide(verdict, extra) {
      const body = Object.assign({ run: data.run, step: p.step, call: p.call, verdict: verdict }, extra || {});
      row.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      post("/api/decide", body).then(function (r) {
        if (!r.ok) row.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      });
    }
    const buttons = [[LABELS.approve, "approve"], [LABELS.edit, "edit"], [LABELS.deny, "deny"]];
    if (p.remember) buttons.push([LABELS.always, "always"]);
    buttons.forEach(function (pair) {
      const b = el("button", "decide " + pair[1], pair[0]);
      b.type = "button";
      b.addEventListener("click", function () {
        if (pair[1] === "edit") {
          if (editor.hidden) { editor.hidden = false; editor.focus(); b.textContent = "Run edited"; return; }
          decide("edit", { input: editor.value });
        } else if (pair[1] === "deny") {
          if (reason.hidden) { reason.hidden = false; reason.focus(); b.textContent = "Deny now"; return; }
          decide("deny", { reason: reason.value });
        } else {
          decide(pair[1]);
        }
      });
      row.appendChild(b);
    });
    box.appendChild(editor);
    box.appendChild(reason);
    box.appendChild(row);
    message.appendChild(box);
  }

  function draw(data) {
    const entry = item(data.run, data.question ? field(data.question) : "");
    const message = entry.message;
    const previous = entry.data;
    entry.data = data;
    // Keep a half-typed edit or reason: redraw the pending box only when the request changes.
    const samePending = previous && previous.pending && data.pending &&
      previous.pending.step === data.pending.step && previous.pending.call === data.pending.call;
    const keep = samePending ? message.querySelector(".pending") : null;
    message.replaceChildren();
    message.dataset.phase = data.phase || "";
    if (data.earlier_steps) message.appendChild(el("p", "earlier", "… " + data.earlier_steps + " earlier steps"));
    (data.steps || []).forEach(function (s) { message.appendChild(drawStep(s)); });
    if (data.pending) {
      if (keep) message.appendChild(keep); else drawPending(data, message);
    }
    if (!data.final) {
      const bar = el("div", "live");
      bar.appendChild(el("span", "status", data.status || ""));
      const stop = el("button", "stop", LABELS.stop);
      stop.type = "button";
      stop.addEventListener("click", function () { stop.disabled = true; post("/api/stop", { run: data.run }); });
      bar.appendChild(stop);
      message.appendChild(bar);
      statusLine.textContent = data.status || "";
    }
    if (data.answer && data.answer.text) {
      const answer = el("div", "answer");
      answer.appendChild(el("span", "label", "Answer"));
      answer.appendChild(markdown(field(data.answer)));
      message.appendChild(answer);
    }
    if (data.outcome) message.appendChild(el("p", "outcome", data.outcome));
    if (data.final && typeof data.retry === "string") {  // interrupted: its question again, once
      const retry = el("button", "retry", LABELS.retry);
      retry.type = "button";
      retry.addEventListener("click", function () {
        retry.disabled = true;
        listen();
        post("/api/retry", { run: data.retry }).then(function (r) { if (r.ok) showError(""); });
      });
      message.appendChild(retry);
    }
    if (data.final) {
      (data.pictures || []).forEach(function (src) {
        // only the data: URLs the server made from bytes it checked (PNG, JPEG, WEBP, GIF)
        if (!/^data:image\/(png|jpeg|webp|gif);base64,[A-Za-z0-9+\/=]+$/.test(src)) return;
        const img = el("img", "picture");
        img.src = src;
        img.alt = "A picture from a tool";
        message.appendChild(img);
      });
      if (data.sources && data.sources.length) {
        const list = el("ul", "sources");
        list.setAttribute("aria-label", "Cited sources");
        data.sources.forEach(function (s) {
          const li = el("li");
          li.appendChild(s.href ? link(s.href, s.host || s.text) : el("span", "url", s.text));
          list.appendChild(li);
        });
        message.appendChild(list);
      }
      const foot = el("p", "footer", data.footer || "");
      if (data.trace_url && data.trace_url.indexOf("/t/") === 0) {
        foot.appendChild(document.createTextNode(" · "));
        const a = el("a", "trace", "the whole trace");
        a.href = data.trace_url;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        foot.appendChild(a);
      }
      message.appendChild(foot);
      if (data.answer && data.run && data.run.indexOf("earlier-") !== 0) message.appendChild(votes(data.run));
      statusLine.textContent = data.outcome || "Answered.";
    }
    entry.li.scrollIntoView({ block: "end" });
  }

  function note(data) {
    const li = el("li", "note", field(data.text));
    log.appendChild(li);
  }

  // ---- the commands' replies (settings, usage, reset, trace, votes): text only -------------
  function told(text) {
    if (!text) return;
    log.appendChild(el("li", "note", text));
    statusLine.textContent = text;
    empty.hidden = true;
  }

  async function command(path, body) {
    const result = await post(path, body);
    if (result.ok) told(result.data.said);
    return result;
  }

  function votes(run) {
    const row = el("div", "votes");
    [["up", LABELS.up, "A good answer"], ["down", LABELS.down, "A poor answer"]].forEach(function (v) {
      const b = el("button", "vote", v[1]);
      b.type = "button";
      b.title = v[2];
      b.setAttribute("aria-label", v[2]);
      b.addEventListener("click", function () { command("/api/vote", { run: run, vote: v[0] }); });
      row.appendChild(b);
    });
    return row;
  }

  async function showTrace() {
    const result = await command("/api/trace", {});
    const found = result.ok ? result.data.trace : null;
    if (!found) return;
    const li = el("li", "note");
    li.appendChild(el("pre", "trace-text", found.markdown || ""));
    if (found.link) li.appendChild(link(found.link, "the whole trace"));
    log.appendChild(li);
  }

  // ---- the stream ---------------------------------------------------------------------------
  function listen() {
    if (events) return;
    events = new EventSource("/api/events");
    events.onmessage = function (event) {
      let data;
      try { data = JSON.parse(event.data); } catch (e) { return; }
      if (data.type === "run") draw(data); else if (data.type === "note") note(data);
    };
    events.addEventListener("bye", function () { events.close(); events = null; });
  }

  function running() {
    for (const entry of messages.values()) if (entry.data && !entry.data.final) return entry.data.run;
    return null;
  }

  function questionId() {
    // randomUUID needs a secure context; a chat reached over plain http on a LAN has not one
    if (window.crypto.randomUUID) return window.crypto.randomUUID();
    const bytes = window.crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }
  // ---- files to send with the next question ----------------------------------------------
  const attached = document.getElementById("attached");
  const picker = document.getElementById("files");
  let pending = []; // File objects, sent with the next question (the server reads them)

  function drawAttached() {
    attached.replaceChildren();
    pending.forEach(function (file, n) {
      const li = el("li", null, "📎 " + file.name); // a name is anyone's text: textContent
      const remove = el("button", null, "×");
      remove.type = "button";
      remove.setAttribute("aria-label", "Remove " + file.name);
      remove.addEventListener("click", function () { pending.splice(n, 1); drawAttached(); });
      li.appendChild(remove);
      attached.appendChild(li);
    });
    attached.hidden = pending.length === 0;
  }
  function attach(files) {
    for (const file of files) pending.push(file);
    drawAttached();
  }
  document.getElementById("attach").addEventListener("click", function () { picker.click(); });
  picker.addEventListener("change", function () { attach(picker.files); picker.value = ""; });
  document.addEventListener("dragover", function (event) {
    if (!event.dataTransfer || event.dataTransfer.types.indexOf("Files") < 0) return;
    event.preventDefault();
    document.body.classList.add("dropping");
  });
  document.addEventListener("dragleave", function () { document.body.classList.remove("dropping"); });
  document.addEventListener("drop", function (event) {
    document.body.classList.remove("dropping");
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    attach(event.dataTransfer.files);
  });

  // ---- the page ------------------------------------------------------------------------------
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const question = box.value.trim();
    if (!question) return;
    showError("");
    listen();
    // The box is free at once for the next message (a burst within agent.merge_window is
    // one question); the id makes a repeated POST (a retry) the same question, answered once.
    const id = questionId();
    const files = pending;
    let body = { question: question, id: id };
    if (files.length) {
      body = new FormData();
      body.append("question", question);
      body.append("id", id);
      files.forEach(function (file) { body.append("file", file, file.name); });
    }
    box.value = "";
    pending = [];
    drawAttached();
    const result = await post("/api/ask", body);
    if (!result.ok) {
      if (!box.value) box.value = question;
      if (!pending.length) { pending = files; drawAttached(); }
    }
  });
  box.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    const run = running();
    if (run) post("/api/stop", { run: run });
  });
  document.getElementById("reset").addEventListener("click", async function () {
    const result = await post("/api/reset", {});
    if (result.ok) {
      messages.clear();
      log.replaceChildren();
      empty.hidden = false;
      statusLine.textContent = result.data.said || "A new conversation.";
    }
  });
  // the session's model, persona and tools: the same settings the other surfaces change
  document.getElementById("model").addEventListener("click", function () {
    const name = window.prompt("Model: a name from the catalogue, or default. Empty lists them.", "");
    if (name !== null) command("/api/settings", { model: name });
  });
  document.getElementById("tools").addEventListener("click", function () {
    const name = window.prompt("A tool to turn on or off. Empty lists them.", "");
    if (name !== null) command("/api/settings", { tool: name });
  });
  document.getElementById("persona").addEventListener("click", async function () {
    const current = await post("/api/settings", { edit: "persona" });
    if (!current.ok || typeof current.data.form !== "string") { if (current.ok) told(current.data.said); return; }
    const text = window.prompt("Persona: tone, focus or language for answers here. Empty clears it.", current.data.form);
    if (text !== null) command("/api/settings", { persona: text });
  });
  document.getElementById("usage").addEventListener("click", function () { command("/api/usage", {}); });
  document.getElementById("trace").addEventListener("click", showTrace);
  verbosity.value = verbosity.dataset.current || "full";
  verbosity.addEventListener("change", function () { command("/api/settings", { verbosity: verbosity.value }); });

  fetch("/api/history", { credentials: "same-origin" })
    .then(function (r) { return r.ok ? r.json() : { turns: [] }; })
    .then(function (data) {
      (data.turns || []).forEach(draw);
      listen();
      box.focus();
    });
})();
