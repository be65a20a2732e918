"""Conversation history: a three-method protocol and the embedded in-memory store.

The Redis implementation lives in ``core.redis_store`` so that importing ``core`` never
loads redis.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Literal, Protocol, TypedDict


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


class HistoryStore(Protocol):
    async def load(self, conversation: str) -> list[Message]: ...

    async def append(self, conversation: str, *messages: Message) -> None: ...

    async def clear(self, conversation: str) -> None: ...


class InMemoryHistoryStore:
    """Keeps the last ``max_turns`` question/answer pairs per conversation in this process."""

    def __init__(self, *, max_turns: int = 10) -> None:
        self._max_messages = max_turns * 2
        self._data: defaultdict[str, deque[Message]] = defaultdict(
            lambda: deque(maxlen=self._max_messages)
        )

    async def load(self, conversation: str) -> list[Message]:
        return list(self._data.get(conversation, ()))

    async def append(self, conversation: str, *messages: Message) -> None:
        self._data[conversation].extend(messages)

    async def clear(self, conversation: str) -> None:
        self._data.pop(conversation, None)
