"""Conversation history: a three-method protocol and the embedded in-memory store.

The Redis implementation lives in ``core.redis_store`` so that importing ``core`` never
loads redis.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Protocol

from core.llm import Message

__all__ = ["HistoryStore", "InMemoryHistoryStore", "Message"]


class HistoryStore(Protocol):
    async def load(self, conversation: str) -> list[Message]: ...

    async def append(self, conversation: str, *messages: Message) -> None: ...

    async def clear(self, conversation: str) -> None: ...


class InMemoryHistoryStore:
    """Keeps the last ``max_turns`` question/answer pairs per conversation in this process,
    for at most ``max_conversations`` conversations: past that, the least recently used one
    is forgotten, so a stream of new channels or DMs cannot grow memory without bound."""

    def __init__(self, *, max_turns: int = 10, max_conversations: int = 10_000) -> None:
        self._max_messages = max_turns * 2
        self._max_conversations = max_conversations
        self._data: OrderedDict[str, deque[Message]] = OrderedDict()

    async def load(self, conversation: str) -> list[Message]:
        messages = self._data.get(conversation)
        if messages is None:
            return []
        self._data.move_to_end(conversation)
        return list(messages)

    async def append(self, conversation: str, *messages: Message) -> None:
        stored = self._data.get(conversation)
        if stored is None:
            stored = self._data[conversation] = deque(maxlen=self._max_messages)
            while len(self._data) > self._max_conversations:
                self._data.popitem(last=False)
        self._data.move_to_end(conversation)
        stored.extend(messages)

    async def clear(self, conversation: str) -> None:
        self._data.pop(conversation, None)

    def __len__(self) -> int:
        return len(self._data)
