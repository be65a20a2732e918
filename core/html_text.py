"""The readable text of an HTML document (``core.files`` reads attached ``.html`` files with it).

Its own module so that ``html.parser`` loads with the first HTML file, not with every start-up
(``core.files`` is imported by the stores; bench/startup.py).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser


class _TextOfHtml(HTMLParser):
    """Text of an HTML document: script, style and other non-content elements dropped
    (never executed: this only reads tags), block elements end lines."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe"})
    _BLOCK = frozenset(
        [
            "p",
            "div",
            "br",
            "li",
            "ul",
            "ol",
            "tr",
            "table",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "section",
            "article",
            "header",
            "footer",
            "pre",
            "blockquote",
            "hr",
            "dd",
            "dt",
        ]
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and not self._skipping:
            self.parts.append("#" * int(tag[1]) + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The readable text of an HTML page, headings as Markdown headings."""
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
