"""Test helper: the in-memory bundle with some of its stores given by the test."""

from __future__ import annotations

import dataclasses
from typing import Any

from core.storage import Stores


def in_memory_stores(**given: Any) -> Stores:
    """``Stores.in_memory()`` with each store named in ``given`` (None: the default)."""
    return dataclasses.replace(
        Stores.in_memory(), **{name: store for name, store in given.items() if store is not None}
    )
