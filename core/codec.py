"""Moved to ``core.stores.codec``; these names stay importable from here until every import
site says ``core.stores.codec``."""

from __future__ import annotations

from core.stores.codec import (
    DICTIONARY,
    LEVEL,
    ZLIB,
    ZLIB_DICT,
    is_packed,
    pack,
    unpack,
)

__all__ = [
    "DICTIONARY",
    "LEVEL",
    "ZLIB",
    "ZLIB_DICT",
    "is_packed",
    "pack",
    "unpack",
]
