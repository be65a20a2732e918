// reactbot's Markdown for the web chat: a model's Markdown drawn as DOM nodes, never as HTML.
// window.reactbotMarkdown(text) returns a <div class="md">. Every text goes in with
// createTextNode / textContent; only http(s) URLs become links.
"use strict";

(function () {
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function safeHref(url) {
    if (typeof url !== "string") return null;
    try {
      const parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) {
      return null;
    }
  }

  function link(url, text) {
    const href = safeHref(url);
    if (!href) return el("span", "url", text || url);
    const a = el("a", null, text || url);
    a.href = href;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    return a;
  }

  // ---- Markdown, drawn as DOM nodes (never HTML) ------------------------------------------
  // Headings, emphasis, code, lists, quotes, tables and links. A link whose text is not its
  // URL shows the URL after the text; only http(s) URLs become links. Each pattern stops at
  // its next delimiter, so hostile text cannot make it backtrack.
  const INLINE = /(`[^`\n]{1,2000}`)|\[([^\[\]\n]{0,500})\]\((https?:\/\/[^\s()<>]{1,2000})\)|(https?:\/\/[^\s<>()\[\]]{1,2000})|\*\*([^*\n]{1,2000})\*\*|__([^_\n]{1,2000})__|(?<![\w*])\*(?=[^\s*])([^*\n]{1,2000}?)\*(?![\w*])|~~([^~\n]{1,2000})~~/g;

  function inline(text, into) {
    const pattern = new RegExp(INLINE.source, "g"); // its own: the calls nest
    let at = 0;
    let m;
    while ((m = pattern.exec(text)) !== null) {
      if (m.index > at) into.appendChild(document.createTextNode(text.slice(at, m.index)));
      if (m[1]) into.appendChild(el("code", null, m[1].slice(1, -1)));
      else if (m[3] !== undefined) {
        const label = m[2].trim();
        if (!label || label.replace(/\/$/, "") === m[3].replace(/\/$/, "")) into.appendChild(link(m[3]));
        else {
          inline(label, into);
          into.appendChild(document.createTextNode(" ("));
          into.appendChild(link(m[3]));
          into.appendChild(document.createTextNode(")"));
        }
      } else if (m[4]) into.appendChild(link(m[4]));
      else if (m[5] || m[6]) inline(m[5] || m[6], into.appendChild(el("strong")));
      else if (m[7]) inline(m[7], into.appendChild(el("em")));
      else if (m[8]) inline(m[8], into.appendChild(el("s")));
      at = pattern.lastIndex;
    }
    if (at < text.length) into.appendChild(document.createTextNode(text.slice(at)));
    return into;
  }

  function cells(row) {
    return row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map(function (c) { return c.trim(); });
  }

  function markdown(text) {
    const out = el("div", "md");
    const lines = text.split("\n");
    let list = null;
    let blank = false; // the line before was blank (a list may go on past one)
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      let m;
      if (/^\s{0,3}(```|~~~)/.test(line)) {
        const fence = line.trim().slice(0, 3);
        const code = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) code.push(lines[i]);
        out.appendChild(el("pre", "code")).appendChild(el("code", null, code.join("\n")));
        list = null;
        continue;
      }
      if (line.indexOf("|") >= 0 && i + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1])) {
        const table = el("table");
        const head = table.appendChild(el("thead")).appendChild(el("tr"));
        cells(line).forEach(function (c) { inline(c, head.appendChild(el("th"))); });
        const body = table.appendChild(el("tbody"));
        for (i += 2; i < lines.length && lines[i].indexOf("|") >= 0 && lines[i].trim(); i++) {
          const tr = body.appendChild(el("tr"));
          cells(lines[i]).forEach(function (c) { inline(c, tr.appendChild(el("td"))); });
        }
        i--;
        out.appendChild(el("div", "table")).appendChild(table);
        list = null;
        continue;
      }
      if ((m = /^\s{0,3}(#{1,6})\s+(.*)$/.exec(line))) {
        inline(m[2].replace(/\s+#+\s*$/, ""), out.appendChild(el("h" + Math.min(6, m[1].length + 2))));
        list = null;
      } else if ((m = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line))) {
        const kind = /\d/.test(m[1]) ? "ol" : "ul";
        if (!list || list.tagName.toLowerCase() !== kind) {
          list = out.appendChild(el(kind));
          if (kind === "ol") list.start = parseInt(m[1], 10) || 1; // "3." starts at 3
        }
        inline(m[2], list.appendChild(el("li")));
      } else if ((m = /^\s{0,3}>\s?(.*)$/.exec(line))) {
        inline(m[1], out.appendChild(el("blockquote")));
        list = null;
      } else if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
        out.appendChild(el("hr"));
        list = null;
      } else if (list && line.trim() && (!blank || /^\s{2,}\S/.test(line))) {
        // A wrapped item's next line (or an indented one after a blank) goes on in that item.
        const item = list.lastElementChild;
        item.appendChild(document.createTextNode(blank ? "\n" : " "));
        inline(line.trim(), item);
      } else if (line.trim()) {
        inline(line, out.appendChild(el("p")));
        list = null;
      } else if (blank) {
        list = null; // two blank lines end a list
      }
      blank = !line.trim();
    }
    return out;
  }

  window.reactbotMarkdown = markdown;
  window.reactbotLink = link;
})();
