"""What one Discord message should hold, in either layout: the payload the renderers make
and the surface sends. A leaf module: the text layout (``render``) and the components
layout (``layout``) both build these, and neither imports the other's types from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MAX_FILES",
    "Block",
    "ButtonState",
    "Card",
    "DiscordPayload",
    "FileSpec",
    "PendingButtons",
    "Rule",
    "SourcesSection",
    "Text",
]

MAX_FILES = 10
"""Attachments Discord takes on one message."""


@dataclass(frozen=True, slots=True)
class Text:
    """A TextDisplay (type 10)."""

    content: str


@dataclass(frozen=True, slots=True)
class Rule:
    """A Separator (type 14) with its divider line."""

    large: bool = False


@dataclass(frozen=True, slots=True)
class SourcesSection:
    """A Section (type 9): ``text`` with the Sources button as its accessory."""

    content: str


Block = Text | Rule | SourcesSection


@dataclass(frozen=True, slots=True)
class Card:
    """One Container: its accent colour and its blocks, top to bottom. The message's buttons
    (``DiscordPayload.stop_button`` / ``approval``) go in an ActionRow at its end, and each
    of the payload's files in a File component (type 13) before it."""

    accent: int | None
    blocks: tuple[Block, ...]


ButtonState = Literal["keep", "show", "remove"]


@dataclass(frozen=True, slots=True)
class FileSpec:
    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class PendingButtons:
    """The decision buttons for one action waiting for approval."""

    step: int
    call: int
    remember: bool
    """Offer "Allow in this conversation"."""
    json_input: bool


@dataclass(frozen=True, slots=True)
class DiscordPayload:
    """What one message should hold. Compared by value: equal payloads are not re-sent."""

    content: str
    files: tuple[FileSpec, ...] = ()
    stop_button: ButtonState = "keep"
    """``show`` attaches the Stop button, ``remove`` drops it, ``keep`` leaves it as it is."""
    thread_name: str = field(default="", compare=False)
    approval: PendingButtons | None = None
    """Show Approve / Edit / Deny (/ Allow in this conversation) beside Stop."""
    card: Card | None = None
    """The ``components`` layout: the message is this Container (and ``content`` is empty)."""
    votes: bool = False
    """👍 / 👎 under a finished answer, recorded on the run's trace (``Trace.votes``)."""
