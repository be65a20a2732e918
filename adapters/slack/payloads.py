"""Raw Slack payloads to questions: pure functions, tested with plain dicts.

A ``Question`` says who asked what, where the live message goes (channel, thread) and which
conversation's history it continues. ``None`` means "not for us" (the bot's own messages,
other bots, edits and other subtypes, empty text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from core.memories import Where

Source = Literal["command", "mention", "dm", "followup"]
"""``followup``: a channel message with no mention (a reply in the thread of one of the
bot's answers, or any message in a free-response channel)."""


class CommandPayload(TypedDict):
    """The fields of a slash-command payload we read."""

    team_id: str
    channel_id: str
    user_id: str
    text: str
    trigger_id: str
    response_url: NotRequired[str]
    command: NotRequired[str]
    user_name: NotRequired[str]
    channel_name: NotRequired[str]


class MessageEvent(TypedDict):
    """The fields of ``app_mention`` and ``message`` events we read."""

    type: str
    channel: str
    user: NotRequired[str]
    text: NotRequired[str]
    ts: str
    thread_ts: NotRequired[str]
    parent_user_id: NotRequired[str]
    team: NotRequired[str]
    bot_id: NotRequired[str]
    subtype: NotRequired[str]
    channel_type: NotRequired[str]
    files: NotRequired[list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Question:
    source: Source
    team: str
    channel: str
    user: str
    text: str
    thread_ts: str | None
    """The thread the live message goes into; ``None`` posts a new root in the channel."""
    claim_key: str
    response_url: str | None = None
    model: str | None = None
    """``/ask --model NAME question``: a catalogue model for this question only."""
    trigger_id: str | None = None
    message_ts: str | None = None
    """The asking message itself (events only): a streamed reply goes into its thread."""
    assistant: bool = False
    """Asked in a thread of Slack's assistant surface (status, title and streaming there)."""
    files: tuple[dict[str, Any], ...] = ()
    """Slack file objects attached to the message (``files``), at most ``MAX_FILES``."""
    parent_user: str | None = None
    """Who posted the thread's parent message (``parent_user_id``), for a reply in a thread."""
    user_name: str = ""
    """The asker's name, when Slack gave it (a command's ``user_name``, ``users.info``)."""
    channel_name: str = ""
    """``#general`` or ``DM``, when Slack gave the channel's name; "" otherwise."""
    closed: bool = False
    """A private channel or a group DM (``conversations.info``: ``adapters.slack.places``),
    once looked up: a person's fact told here is recalled here only."""
    shared: bool = False
    """A channel shared beyond the workspace (Slack Connect), once looked up: people of
    another organisation read it, so it is a space of its own for memories."""

    @property
    def is_dm(self) -> bool:
        """A direct message, or ``/ask`` typed in one (DM channel ids start with ``D``)."""
        return self.source == "dm" or self.channel.startswith("D")

    @property
    def where(self) -> Where:
        """Where it is asked, as memories read it (``memory_where``)."""
        return memory_where(self.team, self.channel, self.is_dm, self.closed, self.shared)

    def conversation(self, root_ts: str | None = None, *, per_thread: bool = True) -> str:
        """``slack:{team}:{channel}[:{thread}]``: a question in a thread continues that
        thread; a new root message starts the thread its trace goes into. With
        ``per_thread`` off, the whole channel is one conversation."""
        thread = self.thread_ts or root_ts
        if not per_thread or (self.source == "dm" and self.thread_ts is None):
            thread = None  # a DM is one ongoing conversation unless the user threads it
        base = f"slack:{self.team}:{self.channel}"
        return f"{base}:{thread}" if thread else base


MAX_FILES = 20
"""File objects kept from one event (Slack attaches at most 10 to a message)."""

_BOT_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL_REF = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!([a-z]+)(?:\^[^|>]*)?(?:\|([^>]*))?>")


def plain_text(text: str, *, bot_user_id: str | None = None) -> str:
    """Slack's escaped message text as the plain text a model should read.

    The bot's own mention is removed; other mentions, channels and links keep a readable
    form; ``&lt;`` and friends are decoded last so decoded text cannot form new markup.
    """

    def user(match: re.Match[str]) -> str:
        return "" if match.group(1) == bot_user_id else f"@{match.group(1)}"

    text = _BOT_MENTION.sub(user, text)
    text = _CHANNEL_REF.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _SPECIAL.sub(lambda m: f"@{m.group(2) or m.group(1)}", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]+", " ", text).strip()


_MODEL_OPTION = re.compile(r"^--model(?:=|\s+)(\S+)\s*")


def memory_where(team: str, channel: str, dm: bool, closed: bool, shared: bool) -> Where:
    """A Slack place as memories read it: the workspace is the space, the channel the place
    (its settings' key); a DM is private; a private channel or group DM closed (its facts
    stay there); a channel shared with another organisation closed and a space of its own
    (the workspace's facts never reach the other organisation's people there)."""
    space = f"{team}/{channel}" if shared and not dm else team
    return Where("slack", space, f"slack:{team}:{channel}", dm, (closed or shared) and not dm)


def from_command(payload: CommandPayload | dict[str, Any]) -> Question:
    text = plain_text(str(payload.get("text", "")))
    model = None
    if (found := _MODEL_OPTION.match(text.lstrip())) is not None:
        model, text = found.group(1), text.lstrip()[found.end() :]
    return Question(
        source="command",
        team=str(payload.get("team_id", "")),
        channel=str(payload.get("channel_id", "")),
        user=str(payload.get("user_id", "")),
        text=text,
        thread_ts=None,
        claim_key=f"slack:command:{payload.get('trigger_id', '')}",
        response_url=payload.get("response_url"),
        model=model,
        trigger_id=payload.get("trigger_id"),
        user_name=str(payload.get("user_name") or ""),
        channel_name=shown_channel(str(payload.get("channel_name") or "")),
    )


def shown_channel(name: str) -> str:
    """A command's ``channel_name`` as people read it: ``#general``; ``DM`` for Slack's
    ``directmessage`` (and a group DM's ``mpdm-…``); "" when none was given."""
    if not name:
        return ""
    if name == "directmessage" or name.startswith("mpdm-"):
        return "DM"
    return f"#{name}"


def ignored_reason(event: MessageEvent | dict[str, Any], *, bot_user_id: str | None) -> str | None:
    """Why an event must not be answered, or ``None`` when it should be."""
    if event.get("bot_id"):
        return "sent by a bot"
    if event.get("subtype") and event.get("subtype") != "file_share":  # a DM with files
        return f"subtype {event['subtype']}"  # message_changed, message_deleted, joins...
    if not event.get("user"):
        return "no user"
    if bot_user_id is not None and event.get("user") == bot_user_id:
        return "our own message"
    return None


def from_event(
    event: MessageEvent | dict[str, Any],
    *,
    event_id: str,
    team: str,
    bot_user_id: str | None,
) -> Question | None:
    """An ``app_mention`` or a direct ``message`` as a Question; ``None`` when not for us."""
    if ignored_reason(event, bot_user_id=bot_user_id) is not None:
        return None
    kind = event.get("type")
    if kind == "message" and event.get("channel_type") != "im":
        return None  # channel messages without a mention: ``followup_from``
    if kind not in ("message", "app_mention"):
        return None
    return _question(event, "dm" if kind == "message" else "mention", event_id, team, bot_user_id)


_OTHERS = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>|<!(?:here|channel|everyone|subteam\^)")


def mentions_others(text: str, *, bot_user_id: str | None) -> bool:
    """The message names someone besides the bot (a person, a group, ``@here``): it is
    addressed to them, not a question for the bot."""
    return any(m.group(1) != bot_user_id for m in _OTHERS.finditer(text))


def mentions_bot(text: str, *, bot_user_id: str | None) -> bool:
    return bot_user_id is not None and any(
        m.group(1) == bot_user_id for m in _BOT_MENTION.finditer(text)
    )


def followup_from(
    event: MessageEvent | dict[str, Any],
    *,
    event_id: str,
    team: str,
    bot_user_id: str | None,
) -> Question | None:
    """A channel ``message`` event (``message.channels`` / ``message.groups``) that may be a
    question without a mention: by a person, not an edit, naming nobody else, and not
    naming the bot (that one arrives as ``app_mention`` too, and is answered there).
    Whether it is one (the bot's thread, a free-response channel) the bot decides."""
    if ignored_reason(event, bot_user_id=bot_user_id) is not None:
        return None
    if event.get("type") != "message" or event.get("channel_type") == "im":
        return None
    raw = str(event.get("text", ""))
    if mentions_bot(raw, bot_user_id=bot_user_id) or mentions_others(raw, bot_user_id=bot_user_id):
        return None
    return _question(event, "followup", event_id, team, bot_user_id)


def _question(
    event: MessageEvent | dict[str, Any],
    source: Source,
    event_id: str,
    team: str,
    bot_user_id: str | None,
) -> Question | None:
    text = plain_text(str(event.get("text", "")), bot_user_id=bot_user_id)
    files = event.get("files")
    if not text and not files:  # an audio clip alone is a question (adapters.voice)
        return None
    thread = event.get("thread_ts")
    return Question(
        source=source,
        team=str(event.get("team") or team),
        channel=str(event["channel"]),
        user=str(event["user"]),
        text=text,
        thread_ts=str(thread) if thread else None,
        claim_key=f"slack:event:{event_id}",
        message_ts=str(event["ts"]) if event.get("ts") else None,
        parent_user=str(event["parent_user_id"]) if event.get("parent_user_id") else None,
        files=tuple(f for f in files[:MAX_FILES] if isinstance(f, dict))
        if isinstance(files, list)
        else (),
    )


def click_channel(body: dict[str, Any]) -> str:
    """The channel of the message a button was clicked on, as Slack's signed payload says."""
    container = body.get("container") or {}
    return str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")


def click_places(body: dict[str, Any], channel: str) -> set[str]:
    """The conversations a click in ``channel`` may belong to (the channel, the thread of
    the message clicked), in ``Question.conversation``'s ids, from Slack's signed payload."""
    team = str((body.get("team") or {}).get("id", ""))
    container = body.get("container") or {}
    message = body.get("message") or {}
    base = f"slack:{team}:{channel}"
    threads = (container.get("thread_ts"), container.get("message_ts"), message.get("thread_ts"))
    return {base, *(f"{base}:{ts}" for ts in threads if ts)}
