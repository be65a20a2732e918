"""Who asks on Telegram and which conversation that is: ``Asker`` (the chat, the person, their
message, the forum topic) and ``conversation_of`` (a private chat or group is one
conversation, each forum topic one of its own). Apart from ``adapters.telegram.bot`` so that
the commands, the schedules and the bot read them without importing one another."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.telegram.intents import is_group
from core.memories import Where as MemoryPlace


def conversation_of(chat: int, thread: int | None = None) -> str:
    """A private chat or group is one conversation; each forum topic is one of its own."""
    return f"telegram:{chat}" if thread is None else f"telegram:{chat}:{thread}"


@dataclass(frozen=True, slots=True)
class Asker:
    chat: int
    user: int
    message: int
    thread: int | None = None
    """The forum topic the question was asked in."""

    @property
    def where(self) -> MemoryPlace:
        """Where they ask, as memories read it: a group is the space and each of its topics
        a place; a private chat is private."""
        group = is_group(self.chat)
        place = conversation_of(self.chat, self.thread)
        return MemoryPlace("telegram", str(self.chat) if group else "", place, not group)
