"""Telegram's events as the dispatcher's intents: where a message or a press happened and
who did it (``where_of``, ``actor_of``), and the shared commands' replies drawn as a chat
message (``said_html``). What is decided about them is ``adapters.dispatch``'s."""

from __future__ import annotations

from typing import Any

from telegram import User

from adapters.dispatch.intents import (
    Actor,
    Command,
    PlaceKind,
    SetModel,
    SetPersona,
    Settings,
    SetVerbosity,
    ShowModels,
    ShowPersona,
    ShowSettings,
    ShowTools,
    ToggleTool,
    Usage,
    Where,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.live import VERBOSITIES
from adapters.telegram.render import cut, markdown_html

SAID_UNITS = 3500
"""Characters of a command's reply (a Telegram message holds 4,096 after entities)."""


def is_group(chat: int) -> bool:
    """Groups and supergroups have negative ids; private chats positive ones."""
    return chat < 0


def where_of(chat: int, thread: int | None = None, *, name: str = "") -> Where:
    """A chat (a group, or a private chat: a DM) or one of a forum's topics."""
    kind: PlaceKind = "topic" if thread is not None else "channel" if is_group(chat) else "dm"
    topic = str(thread) if thread is not None else None
    return Where("telegram", kind, str(chat), thread=topic, name=name)


def actor_of(user: User, *, admin: bool) -> Actor:
    """``admin``: in ``telegram.admins``, or (for the commands) one of the group's
    administrators, as the surface found out."""
    user_id = str(user.id)
    name = user.username or user.full_name or user_id
    return Actor("telegram", user_id, f"telegram:{user_id}", name, admin=admin)


def said_html(outcome: Refusal | Drop | Said) -> str:
    """A command's outcome as the HTML of a reply ("" for a redelivery: nothing to say)."""
    if isinstance(outcome, Drop):
        return ""
    return markdown_html(cut(outcome.text, SAID_UNITS))[0]


def shared_command(command: str, argument: str) -> tuple[type[Command], dict[str, Any]] | None:
    """``/settings``, ``/verbosity LEVEL``, ``/model [NAME|default]``, ``/persona
    [TEXT|clear]``, ``/tools [NAME]`` and ``/usage`` as the intent (and its fields) the
    shared handlers take; None for a ``/verbosity`` without a level, or no command of
    these (``adapters.telegram.commands`` says how to use them)."""
    match command, argument:
        case "usage", _:
            return Usage, {}
        case "settings", _:
            return Settings, {"change": ShowSettings()}
        case "verbosity", level if level in LEVELS:
            chosen = None if level == "default" else level
            return Settings, {"change": SetVerbosity(chosen)}  # type: ignore[arg-type]
        case "model", "":
            return Settings, {"change": ShowModels()}
        case "model", name:
            return Settings, {"change": SetModel(name)}
        case "persona", "":
            return Settings, {"change": ShowPersona()}
        case "persona", text:
            return Settings, {"change": SetPersona("" if text.lower() == "clear" else text)}
        case "tools", "":
            return Settings, {"change": ShowTools()}
        case "tools", name:
            return Settings, {"change": ToggleTool(name)}
    return None


LEVELS = (*VERBOSITIES, "default")
