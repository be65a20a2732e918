"""``/ask-settings`` words that are shared intents (``adapters.dispatch.commands``):
``show`` (or nothing), ``verbosity LEVEL``, ``model [NAME|default]``, ``tools [NAME]``,
``usage``, ``reset`` and ``trace`` (plan decision 7: not new slash commands, so the app's
manifest does not change). ``prompt`` (a modal: ``EditPersona``, then ``SetPersona``),
``memory`` and ``schedule`` are ``adapters.slack.settings_commands``'.

A slash command names no thread (Slack does not offer commands in threads), and with
``redis.per_thread`` each answer in a channel is a conversation of its own, in its thread.
So ``reset`` in a channel forgets the channel's conversation and those of the threads at its
top level (one page of ``conversations.history``, newest first: ``THREADS_READ``), and
``trace`` shows the newest trace among them. Only the person hears the reply: the ack's
ephemeral text when the handler is done within ``ACK_WITHIN`` seconds, else an empty ack
and the reply through the command's ``response_url``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dispatch.commands import Commands
from adapters.dispatch.intents import (
    Actor,
    Command,
    PlaceKind,
    Reset,
    SetModel,
    Settings,
    SetVerbosity,
    ShowModels,
    ShowSettings,
    ShowTools,
    ShowTrace,
    ToggleTool,
    Usage,
    Where,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.live import VERBOSITIES
from adapters.slack.markdown import link, to_mrkdwn
from adapters.slack.payloads import Question, from_command

log = logging.getLogger(__name__)

ACK_WITHIN = 2.5
"""Seconds a command's handler may take for its reply to be the ack's (Slack allows 3)."""
THREADS_READ = 100
"""Top-level messages of a channel read for its answer threads (one page)."""
TRACE_CHARS = 2500
"""Characters of a trace's Markdown in the ephemeral reply (its page holds the whole)."""
Tell = Callable[[Question, str], Awaitable[None]]


def intent_of(words: Sequence[str]) -> tuple[type[Command], dict[str, Any]] | None:
    """The intent (and its fields) of ``/ask-settings`` ``words``; None: not a shared one."""
    match list(words):
        case [] | ["show"]:
            return Settings, {"change": ShowSettings()}
        case ["verbosity", level] if level in (*VERBOSITIES, "default"):
            return Settings, {"change": SetVerbosity(None if level == "default" else level)}  # type: ignore[arg-type]
        case ["model"]:
            return Settings, {"change": ShowModels()}
        case ["model", name]:
            return Settings, {"change": SetModel(name)}
        case ["tools"]:
            return Settings, {"change": ShowTools()}
        case ["tools", name]:
            return Settings, {"change": ToggleTool(name)}
        case ["usage"]:
            return Usage, {}
        case ["reset"]:
            return Reset, {}
        case ["trace"]:
            return ShowTrace, {}
    return None


class SharedCommands:
    """The shared ``/ask-settings`` words of one Slack bot."""

    def __init__(
        self,
        handlers: Commands,
        client: AsyncWebClient,
        *,
        tell: Tell,
        trace_link: Callable[[str], str | None] | None = None,
    ) -> None:
        self.handlers = handlers
        self.client = client
        self.tell = tell
        self.trace_link = trace_link

    async def run(self, ack: AsyncAck, command: dict[str, Any], words: Sequence[str]) -> bool:
        """Answer ``words`` if they are a shared intent (True); False: not one."""
        found = intent_of(words)
        if found is None:
            return False
        question = from_command(command)
        kind, given = found
        if kind in (Reset, ShowTrace):
            given = {**given, "threads": lambda: self._threads(question.channel)}
        work = asyncio.ensure_future(self.dispatch(command, kind, **given))
        done, _ = await asyncio.wait({work}, timeout=ACK_WITHIN)
        if done:
            await ack(text=self.text(work.result()), response_type="ephemeral")
            return True
        await ack()  # Slack's 3 s: the reply follows through the command's response_url
        text = self.text(await work)
        if text:
            await self.tell(question, text)
        return True

    async def dispatch(
        self, command: dict[str, Any], kind: type[Command], **given: Any
    ) -> Refusal | Drop | Said:
        """``command`` (a slash command's payload, or one a form's submission stands for)
        as its intent, through the shared checks and handler."""
        question = from_command(command)
        intent = kind(event=question.claim_key, actor=self.actor(question),
                      where=_where(question), **given)  # fmt: skip
        return await self.handlers.dispatch(intent)

    def actor(self, question: Question) -> Actor:
        admin = self.handlers.policy.admin(question.user)
        name = question.user_name or question.user
        key = f"slack:{question.team}:{question.user}"
        return Actor("slack", question.user, key, name, admin=admin)

    async def _threads(self, channel: str) -> list[str]:
        """The threads at the channel's top level, newest first (none when Slack refuses)."""
        try:
            answer = await self.client.conversations_history(channel=channel, limit=THREADS_READ)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not list the threads of %s: %s", channel, exc)
            return []
        messages = answer.get("messages") or []
        return [str(m["ts"]) for m in messages if isinstance(m, dict) and m.get("ts")]

    def text(self, outcome: Refusal | Drop | Said) -> str:
        """The outcome as mrkdwn (every outside text in it escaped); "" for a redelivery."""
        if isinstance(outcome, Drop):
            return ""
        text = to_mrkdwn(outcome.text)
        if isinstance(outcome, Said) and outcome.trace is not None:
            found = outcome.trace
            shown = found.to_markdown()
            cut = shown[:TRACE_CHARS] + ("\n…" if len(shown) > TRACE_CHARS else "")
            text += "\n" + to_mrkdwn(cut)
            page = self.trace_link(found.id) if self.trace_link is not None else None
            if page:
                text += "\n" + link(page)
        return text


def _where(question: Question) -> Where:
    kind: PlaceKind = "dm" if question.is_dm else "channel"
    return Where("slack", kind, question.channel, space=question.team, name=question.channel_name)


def from_click(body: dict[str, Any], channel: str, team: str) -> Question:
    """A button press under a message as the shared checks read it (who, where): the
    message's thread, or the message itself at a channel's top level (an answer's root)."""
    thread = click_thread(body) or (body.get("container") or {}).get("message_ts")
    user = body.get("user") or {}
    return Question(
        source="command",  # a press, like a command, is no message to gather or thread
        team=team,
        channel=channel,
        user=str(user.get("id", "")),
        text="",
        thread_ts=str(thread) if thread else None,
        claim_key="",
        user_name=str(user.get("username") or user.get("name") or ""),
    )


def click_thread(body: dict[str, Any]) -> str | None:
    """The thread of the message a button was clicked on; None at a channel's top level."""
    container, message = body.get("container") or {}, body.get("message") or {}
    thread = message.get("thread_ts") or container.get("thread_ts")
    return str(thread) if thread else None
