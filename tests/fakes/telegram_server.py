"""A strict local fake of the Telegram Bot API for tests: real HTTP, no network.

Point python-telegram-bot at it (``telegram.api_base_url``)::

    async with FakeTelegram() as fake:
        bot = Bot(fake.token, base_url=fake.base_url)   # .../bot<token>/<method>
        fake.user_says(chat=42, text="What is 2+2?")    # an update for getUpdates
        ...
        assert fake.message(42, 2).text == "4"

Implemented (https://core.telegram.org/bots/api): ``getMe``, ``getUpdates`` (long polling:
``offset`` confirms every update before it, ``timeout`` seconds are waited for a new one),
``setWebhook`` (an https URL; ``secret_token`` of ``A-Za-z0-9_-``; while one is set
getUpdates answers 409 Conflict, as Telegram does), ``deleteWebhook``, ``sendMessage``,
``editMessageText``, ``answerCallbackQuery``, ``sendDocument`` (multipart), ``sendChatAction``,
``getFile`` and the file host beside the API (``GET /file/bot<token>/<file_path>``, only for a
path ``getFile`` handed out; 404 ``Not Found`` otherwise). Method names are case-insensitive; a
request's parameters come as a query string, a form (``application/x-www-form-urlencoded``
or ``multipart/form-data``: what python-telegram-bot sends, objects as JSON text) or a JSON
body. Every call is recorded (``fake.calls``) with its arrival time and outcome.

Answers are ``{"ok": true, "result": …}``, or ``{"ok": false, "error_code": N,
"description": "…"}`` with that HTTP status, refusing what Telegram refuses, in its words:

- a token other than ``fake.token``: 401 ``Unauthorized``; an unknown method: 404 ``Not Found``;
- text empty after entity parsing: 400 ``Bad Request: message text is empty``; longer than
  4,096 characters after entity parsing (counted in UTF-16 code units, as Telegram counts
  entity offsets): 400 ``Bad Request: message is too long``; a caption over 1,024: 400
  ``Bad Request: message caption is too long``;
- ``parse_mode`` HTML with markup Telegram's HTML style does not accept: 400 ``Bad Request:
  can't parse entities: …`` (an unsupported tag, an end tag that closes nothing or the wrong
  tag, a tag never closed, a ``<`` or ``&`` that starts no tag or entity: the style says
  "all <, > and & symbols that are not a part of a tag or an HTML entity must be replaced");
  the message keeps the plain text and the entities Telegram would make (``text_link`` for
  ``<a href>``, ``text_mention`` for ``tg://user?id=``), which is what tests inspect;
- a ForceReply (``force_reply: true``, a placeholder of at most 64 characters) on a new
  message only: an edit takes an inline keyboard (else "can't parse reply keyboard markup
  JSON object");
- an inline keyboard button without text or ``callback_data`` over 64 bytes: 400 ``Bad
  Request: BUTTON_DATA_INVALID`` (text: ``BUTTON_TEXT_EMPTY``); unknown ``parse_mode``:
  ``Bad Request: unsupported parse_mode``;
- ``editMessageText`` whose text, entities and reply markup are exactly the message's: 400
  ``Bad Request: message is not modified: …``; of a message that does not exist or is not
  the bot's: 400 ``Bad Request: message to edit not found``;
- ``message_thread_id`` of a forum topic nobody wrote in: 400 ``Bad Request: message thread
  not found``;
- a reply to a message that does not exist: 400 ``Bad Request: message to be replied not
  found``; a chat no person opened: 400 ``Bad Request: chat not found``;
- ``getChatAdministrators`` of a private chat: 400 ``Bad Request: there are no administrators
  in the private chat``; of a group, its creator and administrators (``fake.set_admins``),
  as ``ChatMember`` objects with every field the API documents;
- ``getFile`` of a ``file_id`` nobody sent: 400 ``Bad Request: invalid file_id``; of a file
  over 20 MB (what bots may download): 400 ``Bad Request: file is too big``;
- ``answerCallbackQuery`` of an id never sent, or answered already: 400 ``Bad Request: query
  is too old and response timeout expired or query ID is invalid``;
- flood control, per chat: more than ``chat_writes`` writes (sends and edits) in any
  ``chat_window`` seconds in a private chat, or ``group_writes`` (20) in any minute in a
  group (negative chat ids: supergroups, forum topics in them), answer 429 ``Too Many Requests: retry after N`` with
  ``parameters.retry_after`` N (the seconds until the oldest leaves the window, rounded up),
  and any write to the chat before those N seconds are over is refused again and counted in
  ``fake.violations`` (a client that ignored ``retry_after``). ``fake.flood(chat, seconds)``
  makes the next write to ``chat`` answer 429 with that ``retry_after``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import BodyPartReader, web

from tests.fakes.local_server import serve_locally

JSON = dict[str, Any]

TOKEN = "123456:TEST-token_for-the-fake"
BOT_ID = 123456
BOT_USERNAME = "reactbot_test_bot"
MESSAGE_LIMIT = 4096
CAPTION_LIMIT = 1024
CALLBACK_DATA_BYTES = 64
FILE_LIMIT = 20 * 1024 * 1024
"""The largest file ``getFile`` hands a bot (Bot API: "up to 20MB in size")."""
PLACEHOLDER_CHARS = 64
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)
_INT_FIELDS = frozenset(
    {"chat_id", "message_id", "offset", "limit", "timeout", "reply_to_message_id", "cache_time"}
)
_OBJECT_FIELDS = frozenset(
    {"reply_markup", "reply_parameters", "entities", "allowed_updates", "link_preview_options"}
)


class ApiError(Exception):
    def __init__(self, code: int, description: str, *, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after

    def body(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.code, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


def bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


# ---- Telegram's HTML style ------------------------------------------------------------------

_ENTITY_OF_TAG = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot)|#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_ATTR = re.compile(r"""([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass(slots=True)
class _Open:
    tag: str
    start: int
    attrs: dict[str, str]


def parse_html(html: str) -> tuple[str, list[JSON]]:
    """The plain text and the entities Telegram makes of ``html`` (``parse_mode: HTML``);
    raises ``ApiError`` 400 "can't parse entities" where Telegram would."""
    out: list[str] = []
    length = 0  # UTF-16 units of ``out``
    stack: list[_Open] = []
    entities: list[JSON] = []
    i = 0

    def refuse(why: str) -> ApiError:
        return bad(f"can't parse entities: {why}")

    def offset(at: int) -> int:
        return len(html[:at].encode())

    while i < len(html):
        char = html[i]
        if char == "&":
            match = _ENTITY.match(html, i)
            if match is None:
                raise refuse(f"Unsupported HTML entity at byte offset {offset(i)}")
            named, dec, hexa = match.groups()
            text = _NAMED[named] if named else chr(int(dec) if dec else int(hexa, 16))
            out.append(text)
            length += utf16_len(text)
            i = match.end()
        elif char == "<":
            end = html.find(">", i)
            if end < 0:
                raise refuse(f"Unclosed start tag at byte offset {offset(i)}")
            inner = html[i + 1 : end]
            if inner.startswith("/"):
                name = inner[1:].strip().lower()
                if not stack:
                    raise refuse(f"Unexpected end tag at byte offset {offset(i)}")
                top = stack[-1]
                if name != top.tag:
                    raise refuse(
                        f'Unmatched end tag at byte offset {offset(i)}, expected "</{top.tag}>", '
                        f'found "</{name}>"'
                    )
                stack.pop()
                entity = _entity(top, length)
                if entity is not None:
                    entities.append(entity)
            else:
                name = (inner.split(None, 1) or [""])[0].lower()
                attrs = {
                    m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
                    for m in _ATTR.finditer(inner[len(name) :])
                }
                if name not in _ENTITY_OF_TAG or (
                    name == "span" and attrs.get("class") != "tg-spoiler"
                ):
                    raise refuse(f'Unsupported start tag "{name}" at byte offset {offset(i)}')
                if name == "blockquote" and any(o.tag == "blockquote" for o in stack):
                    raise refuse(f"Blockquote can't be nested at byte offset {offset(i)}")
                stack.append(_Open(name, length, attrs))
            i = end + 1
        else:
            out.append(char)
            length += utf16_len(char)
            i += 1
    if stack:
        raise refuse(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    return "".join(out), sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def _entity(opened: _Open, end: int) -> JSON | None:
    if end == opened.start:
        return None  # Telegram drops empty entities
    kind = _ENTITY_OF_TAG[opened.tag]
    entity: JSON = {"type": kind, "offset": opened.start, "length": end - opened.start}
    if kind == "text_link":
        url = opened.attrs.get("href", "")
        if url.startswith("tg://user?id="):
            entity = {**entity, "type": "text_mention", "user": {"id": int(url[13:] or 0)}}
        else:
            entity["url"] = url
    elif kind == "pre" and "language" in opened.attrs:
        entity["language"] = opened.attrs["language"]
    return entity


# ---- the record -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    args: JSON
    at: float
    error: ApiError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class Message:
    chat: int
    id: int
    from_bot: bool
    text: str
    entities: list[JSON] = field(default_factory=list)
    html: str = ""
    """What the bot sent (``parse_mode`` HTML), before parsing."""
    reply_markup: JSON | None = None
    reply_to: int | None = None
    document: JSON | None = None
    edits: int = 0
    date: int = field(default_factory=lambda: int(time.time()))
    user: int = 0
    """Who wrote it (a person's id; the bot's own messages: ``BOT_ID``)."""
    thread: int | None = None
    """The forum topic it is in (``message_thread_id``)."""
    replied: JSON | None = None
    """The message it replies to, as the API shows it (``reply_to_message``)."""
    photo: list[JSON] | None = None
    """A photo a person sent: its sizes, smallest first (``PhotoSize`` objects)."""
    timed: tuple[str, JSON] | None = None
    """A voice note, an audio file or a round video a person sent: (``voice``, ``audio`` or
    ``video_note``; the Bot API's ``Voice``, ``Audio`` or ``VideoNote`` object)."""

    @property
    def group(self) -> bool:
        return self.chat < 0

    def as_api(self) -> JSON:
        user = (
            {"id": BOT_ID, "is_bot": True, "first_name": "reactbot", "username": BOT_USERNAME}
            if self.from_bot
            else {"id": self.user, "is_bot": False, "first_name": f"user{self.user}"}
        )
        chat: JSON = (
            {"id": self.chat, "type": "supergroup", "title": f"group{self.chat}"}
            if self.group
            else {"id": self.chat, "type": "private", "first_name": f"user{self.chat}"}
        )
        if self.thread is not None:
            chat["is_forum"] = True
        data: JSON = {"message_id": self.id, "date": self.date, "chat": chat, "from": user}
        if self.thread is not None:
            data["message_thread_id"] = self.thread
            data["is_topic_message"] = True
        if self.replied is not None:
            data["reply_to_message"] = self.replied
        if self.document is not None or self.photo is not None or self.timed is not None:
            if self.document is not None:
                data["document"] = self.document
            if self.photo is not None:
                data["photo"] = self.photo
            if self.timed is not None:
                data[self.timed[0]] = self.timed[1]  # a video note has no caption: none is set
            if self.text:
                data["caption"] = self.text
                if self.entities:
                    data["caption_entities"] = self.entities
        else:
            data["text"] = self.text
            if self.entities:
                data["entities"] = self.entities
        if self.reply_markup and "inline_keyboard" in self.reply_markup:
            data["reply_markup"] = self.reply_markup  # a ForceReply is not shown to others
        if self.edits:
            data["edit_date"] = int(time.time())
        return data

    @property
    def buttons(self) -> list[JSON]:
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [button for row in rows for button in row]


class FakeTelegram:
    """The Bot API of one bot, its private chats and their messages."""

    def __init__(
        self,
        *,
        token: str = TOKEN,
        host: str = "127.0.0.1",
        chat_writes: int = 40,
        chat_window: float = 30.0,
        group_writes: int = 20,
    ) -> None:
        self.token = token
        self.group_writes = group_writes
        """Writes a group takes in any minute (Telegram: "no more than 20 messages per
        minute" in one group)."""
        self.host = host
        self.port = 0
        self.chat_writes = chat_writes
        self.chat_window = chat_window
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], Message] = {}
        self.documents: list[tuple[int, str, bytes]] = []
        """``(chat, file name, content)`` of every document sent."""
        self.actions: list[tuple[int, str, float]] = []
        """``(chat, action, arrival time)`` of every sendChatAction."""
        self.files: dict[str, FakeFile] = {}
        self.photos: list[tuple[int, bytes]] = []
        self.voices: list[tuple[int, bytes]] = []
        """Each voice message the bot sent (sendVoice): its chat and bytes."""
        """Each photo the bot sent (sendPhoto): its chat and bytes."""
        """``file_id`` -> the file people (or the bot) sent."""
        self.downloads: list[str] = []
        """The ``file_path`` of every download the file host served."""
        self._paths: dict[str, FakeFile] = {}
        self.admins: dict[int, list[int]] = {}
        """A group's administrators, its creator first (``set_admins``)."""
        self.answered: dict[str, JSON] = {}
        """Callback query id -> the arguments it was answered with."""
        self.violations = 0
        """Writes that arrived while their chat's ``retry_after`` was still running."""
        self.chats: set[int] = set()
        self.webhook: JSON | None = None
        """The ``setWebhook`` arguments in force (``url``, ``secret_token``...), or None."""
        self.threads: set[tuple[int, int]] = set()
        """Forum topics people wrote in, ``(chat, message_thread_id)``."""
        self._updates: list[JSON] = []
        self._confirmed = 0
        self._new_update = asyncio.Event()
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._query_ids = itertools.count(1)
        self._queries: dict[str, JSON] = {}
        self._writes: defaultdict[int, deque[float]] = defaultdict(deque)
        self._blocked: dict[int, float] = {}
        self._flood_next: dict[int, int] = {}
        self._runner: web.AppRunner | None = None
        self._closing = False
        self._changed = asyncio.Event()

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=60 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner, self.port = await serve_locally(app, host=self.host)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        self._new_update.set()  # long polls end at once
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        """``telegram.api_base_url``: the prefix the client appends its token to."""
        return f"http://{self.host}:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        """The file host beside it (``Bot(base_file_url=…)``)."""
        return f"http://{self.host}:{self.port}/file/bot"

    # ---- the people's side --------------------------------------------------------------
    def user_says(
        self,
        chat: int,
        text: str,
        *,
        user: int | None = None,
        thread: int | None = None,
        reply_to: Message | None = None,
    ) -> Message:
        """A person writes ``text`` in chat ``chat``: their private chat (a positive id, the
        person's own) or a supergroup (a negative id; ``user`` says who, ``thread`` the
        forum topic), as a reply to ``reply_to`` when given. Commands and ``@`` mentions get
        the entities Telegram adds."""
        self.chats.add(chat)
        if thread is not None:
            self.threads.add((chat, thread))
        who = user if user is not None else chat
        message = Message(
            chat, next(self._message_ids), from_bot=False, text=text, user=who, thread=thread,
            replied=reply_to.as_api() if reply_to is not None else None,
        )  # fmt: skip
        if text.startswith("/"):
            command = text.split()[0]
            message.entities = [{"type": "bot_command", "offset": 0, "length": utf16_len(command)}]
        for found in re.finditer(r"@\w+", text):
            start = utf16_len(text[: found.start()])
            mention = {"type": "mention", "offset": start, "length": utf16_len(found.group())}
            if not (text.startswith("/") and found.start() < len(text.split()[0])):
                message.entities.append(mention)
        self.messages[(chat, message.id)] = message
        self._push({"message": message.as_api()})
        return message

    def user_sends(
        self,
        chat: int,
        *,
        caption: str = "",
        document: tuple[str, bytes, str] | None = None,
        photo: bytes | None = None,
        user: int | None = None,
        thread: int | None = None,
        reply_to: Message | None = None,
        voice: tuple[bytes, int] | None = None,
        audio: tuple[str, bytes, str, int] | None = None,
        video_note: tuple[bytes, int] | None = None,
    ) -> Message:
        """A person sends a document (``(file name, content, mime type)``) or a photo (its
        JPEG bytes: Telegram offers a thumbnail and the full size) with ``caption``; or a
        voice note (``(Ogg/Opus bytes, duration in seconds)``, kept as ``voice/….oga``), an
        audio file (``(file name, content, mime type, duration)``) or a round video
        (``(MP4 bytes, duration)``, which carries no caption), as the Bot API describes each
        (``Voice``, ``Audio``, ``VideoNote``)."""
        if video_note is not None and caption:
            raise AssertionError("Telegram round videos carry no caption")
        message = self.user_says(chat, caption, user=user, thread=thread, reply_to=reply_to)
        if voice is not None:
            content, seconds = voice
            found = self.add_file(content, "voice", "voice.oga")
            described = {**found.described(), "duration": seconds, "mime_type": "audio/ogg"}
            message.timed = ("voice", described)
        if audio is not None:
            name, content, mime, seconds = audio
            found = self.add_file(content, "music", name)
            described = {**found.described(), "duration": seconds, "mime_type": mime}
            message.timed = ("audio", {**described, "file_name": name})
        if video_note is not None:
            content, seconds = video_note
            found = self.add_file(content, "video_notes", "note.mp4")
            message.timed = (
                "video_note",
                {**found.described(), "duration": seconds, "length": 240},
            )
        if document is not None:
            name, content, mime = document
            message.document = {
                **self.add_file(content, "documents", name).described(),
                "file_name": name,
                "mime_type": mime,
            }
        if photo is not None:
            thumb = self.add_file(photo[: max(1, len(photo) // 10)], "photos", "thumb.jpg")
            full = self.add_file(photo, "photos", "photo.jpg")
            message.photo = [
                {**thumb.described(), "width": 90, "height": 90},
                {**full.described(), "width": 1280, "height": 960},
            ]
        update = self._updates[-1]  # the one user_says made: it shows the files now
        update["message"] = message.as_api()
        return message

    def set_admins(self, chat: int, users: list[int]) -> None:
        """``users`` administer group ``chat``, the first as its creator."""
        self.chats.add(chat)
        self.admins[chat] = list(users)

    def add_file(self, content: bytes, folder: str, name: str) -> FakeFile:
        number = len(self.files) + 1
        suffix = name.rpartition(".")[2] if "." in name else "bin"
        found = FakeFile(f"BQAC{number:04d}file", f"AgAD{number:04d}", content,
                         f"{folder}/file_{number}.{suffix}")  # fmt: skip
        self.files[found.file_id] = found
        return found

    def press(
        self, message: Message, data: str, *, user: int | None = None, spoofed: bool = False
    ) -> str:
        """A person presses the button with ``callback_data`` ``data`` under ``message``;
        the callback query's id (answerCallbackQuery must name it). ``spoofed``: a modified
        client sends data no button has, which Telegram passes on ("the message originated
        the query can contain no callback buttons with this data", Bot API, CallbackQuery)."""
        if not spoofed and not any(b.get("callback_data") == data for b in message.buttons):
            raise AssertionError(f"no button with callback_data {data!r} under {message.id}")
        query_id = str(next(self._query_ids))
        who = user if user is not None else message.chat
        if who < 0:
            raise AssertionError("a group does not press buttons: say which user does")
        query: JSON = {
            "id": query_id,
            "from": {"id": who, "is_bot": False, "first_name": f"user{who}"},
            "chat_instance": str(message.chat),
            "message": message.as_api(),
            "data": data,
        }
        self._queries[query_id] = query
        self._push({"callback_query": query})
        return query_id

    def flood(self, chat: int, retry_after: int) -> None:
        """The next write to ``chat`` answers 429 with ``retry_after`` seconds."""
        self._flood_next[chat] = retry_after

    def _push(self, update: JSON) -> None:
        self._updates.append({"update_id": next(self._update_ids), **update})
        self._new_update.set()

    @property
    def updates(self) -> list[JSON]:
        """Every update made so far, as getUpdates (or a webhook) would deliver it."""
        return list(self._updates)

    # ---- reading the record ---------------------------------------------------------------
    def message(self, chat: int, message_id: int) -> Message:
        return self.messages[(chat, message_id)]

    def bot_messages(self, chat: int) -> list[Message]:
        return [m for (c, _), m in sorted(self.messages.items()) if c == chat and m.from_bot]

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method.lower()]

    def refused(self) -> list[Call]:
        return [c for c in self.calls if c.error is not None]

    async def wait_for(
        self, predicate: Callable[[], bool], *, within: float = 10.0, what: str = "the condition"
    ) -> None:
        """Until ``predicate()`` holds, checked after each call the fake answers; an
        AssertionError naming ``what`` if it does not within ``within`` seconds."""
        try:
            async with asyncio.timeout(within):
                while not predicate():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    # ---- the API --------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"].lower()
        args: JSON = {}
        try:
            args = await self._args(request)
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                raise ApiError(404, "Not Found")
            result = await handler(args)
        except ApiError as exc:
            self._record(Call(method, args, time.monotonic(), exc))
            return web.json_response(exc.body(), status=exc.code)
        self._record(Call(method, args, time.monotonic()))
        return web.json_response({"ok": True, "result": result})

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self._changed.set()

    async def _args(self, request: web.Request) -> JSON:
        args: JSON = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            if not isinstance(body, dict):
                raise bad("request body must be a JSON object")
            args.update(body)
            return args
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    raise bad("nested multipart bodies are not supported")
                name = part.name or ""
                if part.filename:
                    args[name] = {"filename": part.filename, "content": bytes(await part.read())}
                else:
                    args[name] = self._value(name, await part.text())
            return args
        if request.can_read_body:
            form = await request.post()
            args.update({k: self._value(k, str(v)) for k, v in form.items()})
        return {k: self._value(k, v) if isinstance(v, str) else v for k, v in args.items()}

    @staticmethod
    def _value(name: str, text: str) -> Any:
        if name in _INT_FIELDS:
            try:
                return int(text)
            except ValueError:
                return text
        if name in _OBJECT_FIELDS:
            try:
                return json.loads(text)
            except ValueError as exc:
                raise bad(f"can't parse {name} JSON object") from exc
        return text

    # ---- methods --------------------------------------------------------------------------
    async def _m_getme(self, args: JSON) -> JSON:
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "reactbot",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_setwebhook(self, args: JSON) -> bool:
        url = str(args.get("url", ""))
        if not url.startswith("https://"):
            raise bad("bad webhook: An HTTPS URL must be provided for webhook")
        secret = args.get("secret_token")
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise bad("secret token contains unallowed characters")
        self.webhook = {**args, "url": url}
        return True

    async def _m_deletewebhook(self, args: JSON) -> bool:
        self.webhook = None
        if str(args.get("drop_pending_updates", "")).lower() == "true":
            self._confirmed = self._updates[-1]["update_id"] if self._updates else 0
        return True

    async def _m_getupdates(self, args: JSON) -> list[JSON]:
        if self.webhook is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use "
                "deleteWebhook to delete the webhook first",
            )
        offset = int(args.get("offset") or 0)
        if offset > 0:
            self._confirmed = max(self._confirmed, offset - 1)
        timeout = float(args.get("timeout") or 0)
        limit = int(args.get("limit") or 100)
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            pending = [u for u in self._updates if u["update_id"] > self._confirmed]
            if pending or self._closing or loop.time() >= until:
                return pending[: max(1, min(limit, 100))]
            self._new_update.clear()
            try:
                async with asyncio.timeout(until - loop.time()):
                    await self._new_update.wait()
            except TimeoutError:
                return []

    async def _m_sendmessage(self, args: JSON) -> JSON:
        chat = self._chat(args)
        text, entities = self._text(args, "text", MESSAGE_LIMIT)
        markup = self._markup(args)
        reply_to = self._reply_to(chat, args)
        thread = self._thread(chat, args)
        self._write(chat)
        message = Message(
            chat,
            next(self._message_ids),
            from_bot=True,
            text=text,
            entities=entities,
            html=str(args.get("text", "")),
            reply_markup=markup,
            reply_to=reply_to,
            user=BOT_ID,
            thread=thread,
        )
        self.messages[(chat, message.id)] = message
        return message.as_api()

    async def _m_editmessagetext(self, args: JSON) -> JSON:
        chat = self._chat(args)
        message = self.messages.get((chat, _int(args.get("message_id"))))
        text, entities = self._text(args, "text", MESSAGE_LIMIT)
        markup = self._markup(args, inline_only=True)  # an edit keeps inline keyboards only
        if message is None or not message.from_bot or message.document is not None:
            raise bad("message to edit not found")
        if (text, entities, markup) == (message.text, message.entities, message.reply_markup):
            raise ApiError(400, NOT_MODIFIED)
        self._write(chat)
        message.text, message.entities, message.reply_markup = text, entities, markup
        message.html = str(args.get("text", ""))
        message.edits += 1
        return message.as_api()

    async def _m_answercallbackquery(self, args: JSON) -> bool:
        query_id = str(args.get("callback_query_id", ""))
        if query_id not in self._queries or query_id in self.answered:
            raise bad("query is too old and response timeout expired or query ID is invalid")
        if len(str(args.get("text", ""))) > 200:
            raise bad("MESSAGE_TOO_LONG")
        self.answered[query_id] = args
        return True

    async def _m_senddocument(self, args: JSON) -> JSON:
        chat = self._chat(args)
        document = args.get("document")
        if not isinstance(document, dict):
            raise bad("there is no document in the request")
        caption, entities = self._text(args, "caption", CAPTION_LIMIT, required=False)
        reply_to = self._reply_to(chat, args)
        self._write(chat)
        content: bytes = document["content"]
        name = str(document["filename"])
        self.documents.append((chat, name, content))
        message = Message(
            chat,
            next(self._message_ids),
            from_bot=True,
            text=caption,
            entities=entities,
            reply_to=reply_to,
            document={**self.add_file(content, "documents", name).described(), "file_name": name},
        )
        self.messages[(chat, message.id)] = message
        return message.as_api()

    async def _m_sendphoto(self, args: JSON) -> JSON:
        """A photo upload, refused as the Bot API refuses one (sendPhoto: "The photo must be
        at most 10 MB in size"; bytes no image decoder reads: ``IMAGE_PROCESS_FAILED``)."""
        chat, content, found = self._upload(args, "photo", 10 * 1024 * 1024, _is_image,
                                            "IMAGE_PROCESS_FAILED")  # fmt: skip
        caption, entities = self._text(args, "caption", CAPTION_LIMIT, required=False)
        message = Message(
            chat, next(self._message_ids), from_bot=True, text=caption, entities=entities,
            reply_to=self._reply_to(chat, args),
            photo=[{**found.described(), "width": 512, "height": 512}],
        )  # fmt: skip
        self.photos.append((chat, content))
        return self._sent(message)

    async def _m_sendvoice(self, args: JSON) -> JSON:
        """A voice message upload: the Bot API takes OGG/Opus (or MP3, M4A) of at most 50 MB
        for a bot; other bytes are refused here (the wording is the fake's own)."""
        chat, content, found = self._upload(
            args, "voice", 50 * 1024 * 1024, _is_voice,
            "wrong file type: voice messages must be OGG/Opus, MP3 or M4A",
        )  # fmt: skip
        message = Message(
            chat, next(self._message_ids), True, "", reply_to=self._reply_to(chat, args)
        )
        message.timed = ("voice", {**found.described(), "duration": 1, "mime_type": "audio/ogg"})
        self.voices.append((chat, content))
        return self._sent(message)

    def _upload(
        self, args: JSON, field: str, limit: int, readable: Callable[[bytes], bool], refusal: str
    ) -> tuple[int, bytes, FakeFile]:
        """The chat and the uploaded ``field``'s bytes (kept as a file), or the refusal."""
        chat = self._chat(args)
        upload = args.get(field)
        if not isinstance(upload, dict):
            raise bad(f"there is no {field} in the request")
        content: bytes = upload["content"]
        if len(content) > limit:
            raise bad("file is too big")
        if not readable(content):
            raise bad(refusal)
        self._write(chat)
        return chat, content, self.add_file(content, field, str(upload["filename"]))

    def _sent(self, message: Message) -> JSON:
        self.messages[(message.chat, message.id)] = message
        return message.as_api()

    async def _m_sendchataction(self, args: JSON) -> bool:
        chat = self._chat(args)
        action = str(args.get("action", ""))
        if action not in CHAT_ACTIONS:
            raise bad("wrong parameter action in request")
        self._thread(chat, args)
        self.actions.append((chat, action, time.monotonic()))
        return True

    async def _m_getchatadministrators(self, args: JSON) -> list[JSON]:
        chat = self._chat(args)
        if chat > 0:
            raise bad("there are no administrators in the private chat")
        members: list[JSON] = []
        for k, user in enumerate(self.admins.get(chat, [])):
            person = {"id": user, "is_bot": False, "first_name": f"user{user}"}
            if k == 0:
                members.append({"status": "creator", "user": person, "is_anonymous": False})
                continue
            rights = dict.fromkeys(_ADMIN_RIGHTS, False)
            members.append({"status": "administrator", "user": person, **rights,
                            "can_manage_chat": True})  # fmt: skip
        return members

    async def _m_getfile(self, args: JSON) -> JSON:
        found = self.files.get(str(args.get("file_id", "")))
        if found is None:
            raise bad("invalid file_id")
        if len(found.content) > FILE_LIMIT:
            raise bad("file is too big")
        self._paths[found.path] = found
        return {**found.described(), "file_path": found.path}

    async def _download(self, request: web.Request) -> web.Response:
        """The file host: the bytes of a path ``getFile`` gave out, to this bot's token."""
        if request.match_info["token"] != self.token:
            error = ApiError(401, "Unauthorized")
        elif (found := self._paths.get(request.match_info["path"])) is None:
            error = ApiError(404, "Not Found")
        else:
            self.downloads.append(found.path)
            self._changed.set()
            return web.Response(body=found.content, content_type="application/octet-stream")
        return web.json_response(error.body(), status=error.code)

    # ---- checks ---------------------------------------------------------------------------
    def _chat(self, args: JSON) -> int:
        chat = _int(args.get("chat_id"))
        if chat not in self.chats:
            raise bad("chat not found")
        return chat

    def _text(
        self, args: JSON, name: str, limit: int, *, required: bool = True
    ) -> tuple[str, list[JSON]]:
        raw = str(args.get(name, ""))
        mode = str(args.get("parse_mode", "") or "")
        if mode.lower() == "html":
            text, entities = parse_html(raw)
        elif mode == "":
            text, entities = raw, list(args.get("entities") or [])
        else:
            raise bad("unsupported parse_mode")
        if required and not text.strip():
            raise bad("message text is empty")
        if utf16_len(text) > limit:
            raise bad("message caption is too long" if name == "caption" else "message is too long")
        return text, entities

    def _markup(self, args: JSON, *, inline_only: bool = False) -> JSON | None:
        markup = args.get("reply_markup")
        if markup is None:
            return None
        if isinstance(markup, dict) and "force_reply" in markup and not inline_only:
            placeholder = str(markup.get("input_field_placeholder", ""))
            if markup["force_reply"] is not True or len(placeholder) > PLACEHOLDER_CHARS:
                raise bad("can't parse reply keyboard markup JSON object")
            return markup
        if not isinstance(markup, dict) or not isinstance(markup.get("inline_keyboard"), list):
            raise bad("can't parse reply keyboard markup JSON object")
        for row in markup["inline_keyboard"]:
            for button in row:
                if not str(button.get("text", "")).strip():
                    raise bad("BUTTON_TEXT_EMPTY")
                data = button.get("callback_data")
                if data is not None and not 1 <= len(str(data).encode()) <= CALLBACK_DATA_BYTES:
                    raise bad("BUTTON_DATA_INVALID")
        return markup if markup["inline_keyboard"] else None

    def _reply_to(self, chat: int, args: JSON) -> int | None:
        params = args.get("reply_parameters")
        target = params.get("message_id") if isinstance(params, dict) else None
        target = target if target is not None else args.get("reply_to_message_id")
        if target is None:
            return None
        if (chat, _int(target)) not in self.messages:
            if isinstance(params, dict) and params.get("allow_sending_without_reply"):
                return None
            raise bad("message to be replied not found")
        return _int(target)

    def _thread(self, chat: int, args: JSON) -> int | None:
        if args.get("message_thread_id") in (None, ""):
            return None
        thread = _int(args["message_thread_id"])
        if (chat, thread) not in self.threads:
            raise bad("message thread not found")
        return thread

    def _write(self, chat: int) -> None:
        """Flood control: raises the 429 Telegram would answer, else counts the write."""
        now = time.monotonic()
        blocked = self._blocked.get(chat, -math.inf)
        if now < blocked:
            self.violations += 1
            raise _too_many(math.ceil(blocked - now))
        if (seconds := self._flood_next.pop(chat, None)) is not None:
            self._blocked[chat] = now + seconds
            raise _too_many(seconds)
        window = self._writes[chat]
        limit, per = (self.group_writes, 60.0) if chat < 0 else (self.chat_writes, self.chat_window)
        while window and window[0] <= now - per:
            window.popleft()
        if len(window) >= limit:
            seconds = max(1, math.ceil(window[0] + per - now))
            self._blocked[chat] = now + seconds
            raise _too_many(seconds)
        window.append(now)


_ADMIN_RIGHTS = (
    "can_be_edited", "is_anonymous", "can_manage_chat", "can_delete_messages",
    "can_manage_video_chats", "can_restrict_members", "can_promote_members", "can_change_info",
    "can_invite_users", "can_post_stories", "can_edit_stories", "can_delete_stories",
)  # fmt: skip
"""The fields the Bot API requires of a ``ChatMemberAdministrator``."""


@dataclass(frozen=True, slots=True)
class FakeFile:
    file_id: str
    file_unique_id: str
    content: bytes
    path: str

    def described(self) -> JSON:
        return {
            "file_id": self.file_id,
            "file_unique_id": self.file_unique_id,
            "file_size": len(self.content),
        }


def _is_image(data: bytes) -> bool:
    return data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF8")) or (
        data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    )


def _is_voice(data: bytes) -> bool:
    return data.startswith((b"OggS", b"ID3")) or data[4:8] == b"ftyp"


def _too_many(seconds: int) -> ApiError:
    return ApiError(429, f"Too Many Requests: retry after {seconds}", retry_after=seconds)


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0
