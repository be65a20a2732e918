"""Moved to ``core.stores.bundle`` (``core.stores.Stores``); ``Stores`` stays importable from
here until every import site says ``core.stores``."""

from __future__ import annotations

from core.stores.bundle import (
    Stores,
)

__all__ = [
    "Stores",
]
