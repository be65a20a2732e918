"""How stored text is packed: zlib behind a format byte, so every older form still reads.

A stored value starts with one byte that says how the rest is encoded:

- ``{`` or ``[`` (or any other text): plain JSON, how values were stored before compression;
- ``\\x01`` (``ZLIB``): zlib-compressed UTF-8, no dictionary (traces stored from late 2026);
- ``\\x02`` (``ZLIB_DICT``): zlib-compressed UTF-8 with ``DICTIONARY`` preset. The dictionary
  holds the field names and labels every stored trace, message and search result repeats,
  so a value of a few kilobytes does not pay for them each time.

``DICTIONARY`` can never change: values packed with it stay in Redis for weeks. A new
dictionary comes with a new format byte (and ``unpack`` keeps reading the old one);
``tests/unit/test_codec.py`` pins its checksum.

Standard library only (no redis import): the Redis stores and the search cache use it.
"""

from __future__ import annotations

import zlib

ZLIB = b"\x01"
ZLIB_DICT = b"\x02"
LEVEL = 9
"""zlib's best; with the default memory level (8: 9 costs half as much time again and gains
nothing on values this small) a 10 KB trace packs in about 0.35 ms and unpacks in 0.1 ms."""

_PIECES = (
    # words and phrases of answers, thoughts and tool results (the most frequent go last:
    # zlib finds the dictionary's end closest, so its matches cost least there)
    " https://www. https://en.wikipedia.org/wiki/ .com/ .org/ ",
    " However, For example, because between through without should could would about ",
    " which there their these those other after before where while when what with from ",
    " this that have been will were they them than then also only into more most some ",
    " and the of to in is for on as by it be or an at are was not can a ",
    # the search tool's results and the knowledge base's passages
    "Answer: \n\n1. \n   https://\n   \n2. \n   https://\n   \n3. \n   https://\n   ",
    ".md \u203a ",
    # a history message
    '{"role":"user","content":"',
    '{"role":"assistant","content":"',
    '","steps":"',
    # a stored trace (compact JSON, empty fields left out: ``core.stores.redis.traces.stored_json``)
    '"attachments":[{"mime_type":"',
    '"approval":{"outcome":"approved","by":"',
    '"votes":[{"value":"up","by":"',
    '"status":"answered","cited":[',
    '"reason":"',
    '"notices":["',
    '"models":["',
    '"answer":"',
    '"version":1}',
    '"error":"',
    '"cost_usd":0.000',
    '"call_id":"call_',
    '"sources":["https://',
    '"prompt_tokens":',
    '"completion_tokens":',
    '"model":"gpt-4o-mini"',
    '"started_at":17',
    '"ended_at":17',
    '"raw":"Thought: ',
    "\\nAction: search[",
    "\\nAction: lookup[",
    "\\nAction: calculate[",
    "\\nFinal Answer: ",
    '"observation":"',
    '"action":"search","action_input":"',
    '"action":"lookup","action_input":"',
    '"action":"calculate","action_input":"',
    '"kind":"final","thought":"',
    '{"index":1,"thought":"',
    '{"index":2,"thought":"',
    '{"index":3,"thought":"',
    '{"question":"',
    '","id":"',
    '","conversation":"slack:',
    '","conversation":"discord:',
    '","user":"',
    '"steps":[{"index":',
)
DICTIONARY = "".join(_PIECES).encode()
"""The preset dictionary of ``ZLIB_DICT``: fixed forever (see the module's docstring)."""


def pack(text: str) -> bytes:
    """``text`` in its stored form: ``ZLIB_DICT`` and the compressed UTF-8."""
    packer = zlib.compressobj(
        LEVEL, zlib.DEFLATED, zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY
    )
    return ZLIB_DICT + packer.compress(text.encode()) + packer.flush()


def unpack(raw: bytes | str) -> str:
    """The text of a stored value in any of the formats above; plain text is returned as it
    is. Raises ``ValueError`` for a value that claims a format it does not hold."""
    if isinstance(raw, str):
        return raw
    head = raw[:1]
    try:
        if head == ZLIB_DICT:
            unpacker = zlib.decompressobj(zlib.MAX_WBITS, DICTIONARY)
            data = unpacker.decompress(raw[1:]) + unpacker.flush()
            if not unpacker.eof:
                raise ValueError("a packed value ends early")
            return data.decode()
        if head == ZLIB:
            return zlib.decompress(raw[1:]).decode()
    except zlib.error as exc:
        raise ValueError(f"a packed value does not decompress: {exc}") from exc
    return raw.decode()


def is_packed(raw: bytes | str) -> bool:
    return isinstance(raw, bytes) and raw[:1] in (ZLIB, ZLIB_DICT)
