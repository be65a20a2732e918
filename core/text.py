"""Text from outside (a model, a tool, a person) made safe to show anywhere.

Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) make text
read in another order than it is stored: ``invoice\u202egnp.exe`` shows as ``invoiceexe.png``.
Every surface shows them as U+FFFD instead, one character for one, so lengths measured
before are still right.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_NEUTRAL = str.maketrans(dict.fromkeys(BIDI_CONTROLS, "\ufffd"))


def neutral_bidi(text: str) -> str:
    """``text`` with every bidirectional control as U+FFFD."""
    return text.translate(_NEUTRAL)


_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f-\x9f\\<>\"'`" + BIDI_CONTROLS + "]")
"""What a linked URL may not hold: spaces, controls, quotes, brackets, and the bidirectional
controls (a link would read in another order than it goes, and every page shows them as
U+FFFD, so the ``href`` would not be the URL)."""


def http_url(url: str, *, limit: int) -> str | None:
    """``url`` when it is a plain absolute http(s) URL with a host, at most ``limit``
    characters, with no space, control (bidirectional ones too), quote, backslash or angle
    bracket in it (it can go
    into an ``href`` as it is); None otherwise (show it as text)."""
    if len(url) > limit or _UNSAFE_IN_URL.search(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url
