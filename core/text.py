"""Text from outside (a model, a tool, a person) made safe to show anywhere.

Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) make text
read in another order than it is stored: ``invoice\u202egnp.exe`` shows as ``invoiceexe.png``.
Every surface shows them as U+FFFD instead, one character for one, so lengths measured
before are still right.
"""

from __future__ import annotations

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_NEUTRAL = str.maketrans(dict.fromkeys(BIDI_CONTROLS, "\ufffd"))


def neutral_bidi(text: str) -> str:
    """``text`` with every bidirectional control as U+FFFD."""
    return text.translate(_NEUTRAL)
