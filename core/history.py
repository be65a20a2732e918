"""Moved to ``core.stores`` (the protocol in ``protocols``, the store in ``memory``); these
names stay importable from here until every import site says ``core.stores``."""

from __future__ import annotations

from core.llm import Message
from core.stores.memory import InMemoryHistoryStore
from core.stores.protocols import HistoryStore

__all__ = ["HistoryStore", "InMemoryHistoryStore", "Message"]
