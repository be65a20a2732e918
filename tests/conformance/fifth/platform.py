"""The fake chat platform: channels of messages with ids, threads under messages, buttons
as data, every edit recorded, ephemeral notes per person, and admins as the platform's own
fact (as a Telegram chat's administrators or a Discord guild's are). It refuses what a real
one would: an edit of a message that does not exist, a message over ``MESSAGE_CHARS``, a
press on a button the message does not carry."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

MESSAGE_CHARS = 4_000


class Refused(Exception):
    """The platform refused the call (as an HTTP 400 would)."""


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    action: str
    """What the press means, as data: ``stop``, ``approve``, ``retry``, ``vote:up``, …"""
    value: str = ""
    """The button's data (a run id, ``run:step:call``): written by us, readable by anyone."""


@dataclass(slots=True)
class Message:
    id: str
    channel: str
    author: str
    text: str
    thread: str | None = None
    buttons: tuple[Button, ...] = ()
    reply_to: str | None = None
    """The message this one answers (shown above it, as a quote)."""
    edits: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Platform:
    bot: str = "bot"
    admins: set[str] = field(default_factory=set)
    messages: dict[str, Message] = field(default_factory=dict)
    private: dict[str, list[str]] = field(default_factory=dict)
    """What each person was told that only they see, in order."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def post(
        self,
        channel: str,
        author: str,
        text: str,
        *,
        thread: str | None = None,
        buttons: tuple[Button, ...] = (),
        reply_to: str | None = None,
    ) -> Message:
        _bounded(text)
        message = Message(f"m{next(self._ids)}", channel, author, text, thread, buttons, reply_to)
        self.messages[message.id] = message
        return message

    def edit(self, message_id: str, text: str, buttons: tuple[Button, ...]) -> None:
        message = self.messages.get(message_id)
        if message is None or message.author != self.bot:
            raise Refused(f"no message {message_id} of the bot's")
        _bounded(text)
        message.edits.append(message.text)
        message.text, message.buttons = text, buttons

    def tell(self, person: str, text: str) -> None:
        _bounded(text)
        self.private.setdefault(person, []).append(text)

    def button(self, message_id: str, action: str) -> Button:
        message = self.messages.get(message_id)
        found = next((b for b in message.buttons if b.action == action), None) if message else None
        if found is None:
            raise Refused(f"message {message_id} has no {action} button")
        return found


def _bounded(text: str) -> None:
    if not text or len(text) > MESSAGE_CHARS:
        raise Refused(f"a message holds 1 to {MESSAGE_CHARS} characters, not {len(text)}")
