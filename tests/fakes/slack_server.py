"""A local fake of the Slack Web API for tests and benchmarks: real HTTP, no network.

Point ``AsyncWebClient(token=..., base_url=fake.base_url)`` (``slack.api_base_url``) at it::

    async with FakeSlack() as fake:
        fake.fail("chat.update", "ratelimited", status=429, retry_after=1)
        fake.not_joined.add("C_NOT_JOINED")
        ...
        assert fake.calls("chat.postMessage")[0].args["channel"] == "C1"

Implemented: ``auth.test``, ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``,
``conversations.info``, ``views.open``, agent streaming (``chat.startStream``,
``chat.appendStream``, ``chat.stopStream``: see ``validate_chunks`` and ``_stream_refusal``;
streamed messages are kept in ``fake.streams``), ``assistant.threads.setStatus``,
``setTitle`` and ``setSuggestedPrompts`` (kept in ``fake.assistant_threads``), the
``files_upload_v2`` trio
(``files.getUploadURLExternal``, the upload URL, ``files.completeUploadExternal``), and
``response_url`` endpoints (``fake.response_url(name)``). Every call is recorded with its arrival time, and a refused
one with the error and the ``errors`` detail Slack would have sent.

It refuses what Slack refuses, the way Slack refuses it (HTTP 200, ``{"ok": false, "error":
..., "errors": [...], "response_metadata": {"messages": ["[ERROR] ..."]}}``); see
``validate_message`` for the message limits and where each was confirmed. Beyond those:

- every Web API method needs the bot token, sent the way slack_sdk sends it (``Authorization:
  Bearer <token>``) or as the ``token`` argument Slack also accepts: none answers
  ``not_authed``, any other ``invalid_auth`` (``FakeSlack(token=...)``; "xoxb-test" by default,
  the token the tests configure). The upload URL and response URLs need none (Slack signs them).
- ``files.getUploadURLExternal`` needs ``filename`` and a positive ``length`` (else
  ``missing_argument``); the upload URL answers non-200 unless exactly ``length`` bytes
  arrive ("a non-200 response indicates a failure"); ``files.completeUploadExternal``
  answers ``file_not_found`` for a file whose upload never arrived whole.
- ``views.open`` exchanges a trigger the fake minted (``fake.trigger()``, what a click or a
  command carries): once, within ``TRIGGER_TTL`` seconds; see ``validate_view`` for the
  view's limits. Opened views are kept in ``fake.views``; ``fake.submission(view, values,
  user=...)`` builds the ``view_submission`` payload Slack would send when it is submitted.

Scripting:

- ``fail(method, error, status=200, retry_after=None, times=1, when=None)``: the next
  ``times`` calls of ``method`` (only those whose arguments ``when(args)`` accepts, when given)
  answer ``{"ok": false, "error": error}`` (``ratelimited`` with 429 and a ``Retry-After``
  header, ``msg_blocks_too_long``, ``not_in_channel``...).
- ``not_joined``: channels where posting answers ``not_in_channel``.
- ``no_streaming``: channels where ``chat.startStream`` answers ``channel_type_not_supported``;
  ``stream_max_chars`` / ``close_stream(ts)``: Slack ends a stream (then
  ``message_not_in_streaming_state``, as after ``chat.stopStream``).

Streaming, read strictly: ``markdown_text`` and ``chunks`` never in one call, and
``markdown_text`` at most 12,000 characters (``invalid_arguments``, the fake's choice of error:
Slack documents the limit, not the error); chunks of the four documented types with their
fields (``invalid_chunks``, listed for appendStream); task statuses ``pending``,
``in_progress``, ``complete``, ``error``; ``title``, ``details`` and ``output`` at most 256
characters; ``recipient_user_id`` and ``recipient_team_id`` outside DMs
(``missing_recipient_user_id`` / ``missing_recipient_team_id``); ``thread_ts`` required.
- ``limit(method, per_second)``: per channel, more than that many calls in any one-second
  window answer 429 (``chat.postMessage``'s "1 per second per channel", so a benchmark can
  count violations).
- ``workspace_limit(method, per_minute)``: across the workspace, more than that many calls in
  any 60 seconds answer 429 with the seconds until one expires (the Web API tiers, "per
  method per app per workspace", read strictly: ``chat.update`` is Tier 3, 50+ per minute).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
import urllib.parse
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from tests.fakes.local_server import serve_locally

JSON = dict[str, Any]

BOT_USER_ID = "UBOTREACT"
BOT_ID = "BREACT"
TEAM_ID = "T0TEAM"
TOKEN = "xoxb-test"

# ---- Slack's message limits ----------------------------------------------------------------
#
# Each from Slack's own documentation or slack_sdk's source (slackapi/python-slack-sdk,
# slack_sdk/models/blocks/*.py, which encodes the same numbers as JsonValidators):
MAX_BLOCKS = 50
"""Blocks per message: https://api.slack.com/reference/block-kit/blocks ("up to 50 blocks in
each message"); refused with "no more than 50 items allowed [json-pointer:/blocks]"."""
SECTION_TEXT = 3000
"""Section text 1..3000 characters, ``fields`` at most 10 items of at most 2000 each:
https://docs.slack.dev/reference/block-kit/blocks/section-block (SectionBlock in slack_sdk)."""
SECTION_FIELDS = 10
SECTION_FIELD_TEXT = 2000
TEXT_OBJECT = 3000
"""Any text object: https://docs.slack.dev/reference/block-kit/composition-objects/text-object"""
HEADER_TEXT = 150
"""Header text, plain_text only: https://docs.slack.dev/reference/block-kit/blocks/header-block"""
CONTEXT_ELEMENTS = 10
"""ContextBlock.elements_max_length in slack_sdk (docs: "Maximum number of items is 10")."""
ACTIONS_ELEMENTS = 25
"""https://api.slack.com/reference/block-kit/blocks#actions ("a maximum of 25 elements")."""
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
BUTTON_URL = 3000
"""ButtonElement in slack_sdk (text_max_length, value_max_length, url_max_length)."""
ID_LENGTH = 255
"""``action_id`` and ``block_id``: BlockElement.action_id_max_length, Block.block_id_max_length."""
MARKDOWN_BLOCK_TEXT = 12_000
"""https://docs.slack.dev/reference/block-kit/blocks/markdown-block"""
BLOCKS_TEXT = 12_000
"""``msg_blocks_too_long``: the cumulative limit is undocumented. A Slack engineer gave it as
"12,000 text characters with a buffer for block containers"
(https://github.com/slackapi/bolt-js/issues/2509, quoted in
https://github.com/slackapi/bolt-js/issues/2867, which also saw 11,341 characters in 45 blocks
refused). The fake refuses more than 12,000 characters of block text; the container buffer
is unknown, so a renderer should stay well below it (ours keeps ~4,000)."""
TEXT_LIMIT = 4_000
"""Top-level ``text``: chat.update documents ``msg_too_long`` as "The `text` field cannot
exceed 4,000 characters" (https://docs.slack.dev/reference/methods/chat.update, errors). The
2018 changelog promised truncation at 40,000 instead
(https://api.slack.com/changelog/2018-04-truncating-really-long-messages), but slack_sdk's
maintainer says that is old and a ~4K text can now be refused with ``msg_too_long``
(https://github.com/seratch/ChatGPT-in-Slack/issues/102). The fake takes the strict reading
for all three chat methods."""

# ---- Slack's agent streaming (chat.startStream / appendStream / stopStream) ----------------
#
# https://docs.slack.dev/reference/methods/chat.startStream (and appendStream, stopStream), the
# error lists in slack-ruby/slack-api-ref methods/chat/chat.*Stream.json, slack_sdk's
# models/messages/chunk.py (the chunk types and the task statuses) and the Node SDK's
# TaskUpdateChunk (details and output "Maximum 256 characters").
STREAM_MARKDOWN = 12_000
"""``markdown_text``: "Limit this field to 12,000 characters" (all three methods)."""
TASK_FIELD = 256
"""A task_update's ``title``, ``details`` and ``output``; a plan_update's ``title`` likewise
(the issue's reading: "256-character fields")."""
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
TASK_DISPLAY_MODES = frozenset({"timeline", "plan"})
CONTEXT_ACTIONS_ELEMENTS = 5
"""ContextActionsBlock.elements_max_length in slack_sdk ("Maximum number of items is 5")."""
_CHUNK_KEYS: dict[str, frozenset[str]] = {
    "markdown_text": frozenset({"type", "text"}),
    "task_update": frozenset({"type", "id", "title", "status", "details", "output", "sources"}),
    "plan_update": frozenset({"type", "title"}),
    "blocks": frozenset({"type", "blocks"}),
}
_STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})

# ---- Slack's view (modal) limits ---------------------------------------------------------------
#
# https://docs.slack.dev/reference/views/modal-views (the modal view object), the same numbers
# in slack_sdk/models/views/__init__.py (View.*_max_length and its JsonValidators):
VIEW_TITLE = 24
"""``title``: a plain_text object, "max length of 24 characters"; so are ``close`` and
``submit`` (``submit`` "is required when an input block is within the blocks array")."""
VIEW_BLOCKS = 100
"""``blocks``: "Max of 100 blocks" (slack_sdk: "views must contain between 1 and 100 blocks")."""
PRIVATE_METADATA = 3000
"""``private_metadata``: "Max length of 3000 characters"."""
CALLBACK_ID = 255
"""``callback_id``: max 255 characters (slack_sdk View.callback_id_max_length; the node SDK's
ModalView documents "Maximum length of 255 characters"); ``external_id`` likewise
(https://docs.slack.dev/reference/methods/views.open, "a max length of 255 characters")."""
VIEW_BYTES = 250 * 1024
"""``view_too_large``: "Error returned if the provided view is greater than 250kb" (the
views.open error list, e.g. slack-ruby/slack-api-ref methods/views/views.open.json)."""
INPUT_LABEL = 2000
INPUT_HINT = 2000
"""Input block ``label`` (required, plain_text) and ``hint``: "Maximum length for the text in
this field is 2000 characters" (https://docs.slack.dev/reference/block-kit/blocks/input-block;
InputBlock.label_max_length / hint_max_length in slack_sdk)."""
INPUT_MIN_LENGTH = (0, 3000)
INPUT_MAX_LENGTH = (1, 3000)
PLACEHOLDER = 150
"""plain_text_input: ``min_length`` "between 0 and 3000, inclusive", ``max_length`` "between 1
and 3000, inclusive", ``action_id`` at most 255
(https://docs.slack.dev/reference/block-kit/block-elements/plain-text-input-element); the
placeholder at most 150 characters (slack_sdk InputInteractiveElement.placeholder_max_length).
``initial_value`` has no documented limit, and Slack's Block Kit team confirmed there is no
hard one (https://github.com/IBM/slack-wrench/issues/105): the fake does not limit it either
(the bot keeps it within its field's ``max_length`` anyway)."""
TRIGGER_TTL = 3.0
"""A trigger is exchanged once, within 3 seconds ("Pass a valid trigger_id within 3 seconds of
receiving it": https://docs.slack.dev/tools/bolt-python/concepts/opening-modals); views.open
answers ``invalid_trigger_id``, ``expired_trigger_id`` or ``exchanged_trigger_id`` otherwise
(the views.open error list)."""

_MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    args: JSON
    at: float
    status: int
    error: str | None
    errors: tuple[str, ...] = ()


@dataclass(slots=True)
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[JSON]
    thread_ts: str | None
    versions: list[tuple[float, str, list[JSON]]] = field(default_factory=list)
    user: str = BOT_USER_ID
    """Who wrote it: the bot (``chat.postMessage``), or a person (``add_message``)."""
    subtype: str | None = None


@dataclass(slots=True)
class Stream:
    """A message streamed with chat.startStream: what a reader sees of it so far."""

    channel: str
    ts: str
    thread_ts: str | None
    recipient_user_id: str | None
    recipient_team_id: str | None
    task_display_mode: str
    markdown: str = ""
    tasks: dict[str, JSON] = field(default_factory=dict)
    """Each task as last updated (its id, title, status, details, output, sources)."""
    task_updates: list[JSON] = field(default_factory=list)
    """Every task_update chunk received, in order."""
    plan_title: str | None = None
    streaming: bool = True
    stopped_by_slack: bool = False
    blocks: list[JSON] = field(default_factory=list)
    """The blocks chat.stopStream put at the bottom of the finished message."""


@dataclass(frozen=True, slots=True)
class _Failure:
    error: str
    status: int
    retry_after: int | None
    errors: tuple[str, ...] = ()
    when: Callable[[JSON], bool] | None = None
    messages_only: bool = False
    """Send ``errors`` only as ``response_metadata.messages`` (views.open does, per the
    answers quoted in its docs and issues), not as an ``errors`` list too."""
    extra: JSON = field(default_factory=dict)
    """More fields of the error body (``missing_scope``'s ``needed`` and ``provided``)."""


@dataclass(slots=True)
class _Upload:
    filename: str
    length: int
    data: bytes | None = None


class FakeSlack:
    def __init__(self, *, host: str = "127.0.0.1", token: str = TOKEN) -> None:
        self.host = host
        self.token = token
        self.port = 0
        self.records: list[Call] = []
        self.messages: dict[str, Message] = {}
        self.responses: list[tuple[str, JSON]] = []
        self.uploads: dict[str, bytes] = {}
        self.shared_files: list[JSON] = []
        """Each file an upload completed (files.completeUploadExternal): its id, filename,
        title, bytes, and the channel and thread it was shared in."""
        """Files whose upload arrived whole, by file id."""
        self.not_joined: set[str] = set()
        self.channel_members: dict[str, list[str]] = {}
        """Who is in which channel, for ``conversations.members`` (paged by ``limit``)."""
        self.streams: dict[str, Stream] = {}
        """Streamed messages by ``ts``."""
        self.no_streaming: set[str] = set()
        """Channels where chat.startStream answers ``channel_type_not_supported``."""
        self.stream_max_chars: int | None = None
        """Slack closes a stream that grew longer than this (its markdown): the append that
        would cross it, and every call after, answer ``message_not_in_streaming_state``."""
        self.assistant_threads: dict[tuple[str, str], JSON] = {}
        """``(channel_id, thread_ts)`` -> the status, title and prompts set on it."""
        self.views: list[JSON] = []
        """Views opened with ``views.open``, as Slack answered them (with ``id`` and ``state``)."""
        self._triggers: dict[str, float] = {}
        self._exchanged: set[str] = set()
        self.rate_limited = 0
        self._pending: dict[str, _Upload] = {}
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._limits: dict[str, int] = {}
        self._windows: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._workspace_limits: dict[str, int] = {}
        self._workspace_windows: defaultdict[str, deque[float]] = defaultdict(deque)
        self._workspace_window = 60.0
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.files: dict[str, tuple[bytes, str]] = {}
        """Hosted files by ``url_private`` path: (bytes, mimetype) (``add_file``)."""
        self.file_requests: list[tuple[str, str | None]] = []
        """(path, Authorization header) of every request for a hosted file."""
        self.scopes: set[str] = set(BOT_SCOPES)
        """The bot token's scopes: a method that needs one it lacks answers ``missing_scope``
        with ``needed`` and ``provided``, as Slack does."""
        self.users: dict[str, str] = {}
        """Display names by user id, for ``users.info`` (``add_message`` fills it)."""
        self.channel_names: dict[str, str] = {}
        """Channel names by id, for ``conversations.info`` (a DM, ``D…``, has none)."""
        self.private_channels: set[str] = set()
        """Private channels (``is_private``; a ``G…`` id is one too), for
        ``conversations.info``: described only to a member (``not_joined`` hides them:
        ``channel_not_found``) and only with ``groups:read``."""
        self.group_dms: set[str] = set()
        """Group DMs (``is_mpim``, private), described only with ``mpim:read``."""
        self.shared_channels: set[str] = set()
        """Channels shared with another organisation (Slack Connect: ``is_shared``,
        ``is_ext_shared``)."""

    # ---- lifecycle ------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # slack_sdk reads some methods with GET
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{name}", self._response)
        app.router.add_get("/files-pri/{tail:.*}", self._file)
        self._runner, self.port = await serve_locally(app, host=self.host, shutdown_timeout=60.0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, name: str) -> str:
        return f"{self.url}/response/{name}"

    def add_file(
        self,
        name: str,
        data: bytes,
        *,
        mimetype: str = "text/plain",
        declared_size: int | None = None,
        url: str | None = None,
        clip_ms: int | None = None,
    ) -> JSON:
        """A file object as Slack puts it in a message event's ``files``, its
        ``url_private`` served by this fake (``files.slack.com/files-pri/{team}-{id}/{name}``
        in Slack) to the bot token only. ``declared_size`` is the ``size`` it claims (a lie
        when it differs); ``url`` points it elsewhere (a foreign host) instead. ``clip_ms``:
        an audio clip recorded in Slack, described as Slack describes one (``subtype``
        ``slack_audio``, ``media_display_type`` ``audio``, its ``duration_ms``)."""
        file_id = f"F{next(self._ts):010d}"
        path = f"/files-pri/{TEAM_ID}-{file_id}/{name}"
        self.files[path] = (data, mimetype)
        private = url or f"{self.url}{path}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data) if declared_size is None else declared_size,
            "mode": "hosted",
            "is_external": False,
            "url_private": private,
            "url_private_download": url
            or f"{self.url}/files-pri/{TEAM_ID}-{file_id}/download/{name}",
            **(
                {"subtype": "slack_audio", "media_display_type": "audio", "duration_ms": clip_ms}
                if clip_ms is not None
                else {}
            ),
        }

    async def _file(self, request: web.Request) -> web.Response:
        """``url_private``: the bytes for the bot token. Without a valid token Slack does
        not answer 401: it redirects (302) to the workspace's sign-in page,
        ``https://{workspace}.slack.com/?redir=%2Ffiles-pri%2F...`` (seen in
        slackapi/deno-slack-sdk#285; the browser then lands on an HTML page)."""
        auth = request.headers.get("Authorization")
        self.file_requests.append((request.path, auth))
        path = request.path.replace("/download/", "/", 1)
        found = self.files.get(path)
        if auth != f"Bearer {self.token}":
            redirect = "https://fake-workspace.slack.com/?redir=" + urllib.parse.quote(
                request.path, safe=""
            )
            return web.Response(status=302, headers={"Location": redirect}, text="Found")
        if found is None:
            return web.Response(status=404, text="File not found")
        data, mimetype = found
        return web.Response(body=data, content_type=mimetype)

    def trigger(self) -> str:
        """A new trigger id, as Slack puts in a click or a command payload."""
        n = next(self._ts)
        trigger = f"{n}.{1000 + n}.{n:06x}abcdef"
        self._triggers[trigger] = time.monotonic()
        return trigger

    def submission(
        self, view: JSON, values: dict[str, str | None], *, user: str, team: str = TEAM_ID
    ) -> JSON:
        """The ``view_submission`` payload Slack sends when ``user`` submits ``view`` (one of
        ``self.views``) with ``values`` by input ``block_id`` (absent: left empty, ``None``)."""
        state: dict[str, dict[str, JSON]] = {}
        for block in view.get("blocks", ()):
            if block.get("type") == "input":
                element = block["element"]
                state[block["block_id"]] = {
                    element["action_id"]: {
                        "type": element["type"],
                        "value": values.get(block["block_id"]),
                    }
                }
        return {
            "type": "view_submission",
            "team": {"id": team, "domain": "fake"},
            "user": {"id": user, "team_id": team},
            "api_app_id": "A1",
            "token": "legacy",
            "trigger_id": self.trigger(),
            "view": {**view, "state": {"values": state}},
            "response_urls": [],
            "is_enterprise_install": False,
        }

    # ---- scripting ------------------------------------------------------------------------
    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[JSON], bool] | None = None,
    ) -> Self:
        for _ in range(times):
            self._failures[method].append(_Failure(error, status, retry_after, when=when))
        return self

    def limit(self, method: str, per_second: int) -> Self:
        self._limits[method] = per_second
        return self

    def workspace_limit(self, method: str, per_minute: int, *, window: float = 60.0) -> Self:
        """At most ``per_minute`` calls of ``method`` in any ``window`` seconds (a minute;
        tests shorten it to keep their runs short)."""
        self._workspace_limits[method] = per_minute
        self._workspace_window = window
        return self

    # ---- inspection -----------------------------------------------------------------------
    def calls(self, method: str, *, ok: bool | None = None) -> list[Call]:
        return [
            c
            for c in self.records
            if c.method == method and (ok is None or (c.error is None) == ok)
        ]

    def roots(self, channel: str | None = None) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if m.thread_ts is None and (channel is None or m.channel == channel)
        ]

    def replies(self, channel: str, thread_ts: str) -> list[Message]:
        found = [
            m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts
        ]
        return sorted(found, key=lambda m: float(m.ts))

    # ---- handlers -------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        channel = str(args.get("channel") or args.get("channel_id") or "")
        failure = self._auth_failure(request, args) or self._scripted_failure(method, channel, args)
        if failure is not None:
            return await self._answer(method, args, failure)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return await self._answer(method, args, _Failure("unknown_method", 404, None))
        if (needed := self._missing_scope(method, channel)) is not None:
            return await self._answer(
                method, args, _Failure("missing_scope", 200, None, extra=needed)
            )
        if method in _MESSAGE_METHODS and (refusal := validate_message(args)) is not None:
            error, errors = refusal
            return await self._answer(method, args, _Failure(error, 200, None, tuple(errors)))
        if method in _STREAM_METHODS and (refused := self._stream_refusal(method, args)):
            return await self._answer(method, args, refused)
        if method == "views.open" and (refused := self._view_refusal(args)) is not None:
            return await self._answer(method, args, refused)
        result: JSON = handler(args)
        if not result.get("ok", False):
            return await self._answer(method, args, _Failure(str(result["error"]), 200, None))
        await self._record(Call(method, args, time.monotonic(), 200, None))
        return web.json_response(result)

    def _auth_failure(self, request: web.Request, args: JSON) -> _Failure | None:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer ") :] if header.startswith("Bearer ") else args.get("token")
        if not token:
            return _Failure("not_authed", 200, None)
        if token != self.token:
            return _Failure("invalid_auth", 200, None)
        return None

    def _scripted_failure(self, method: str, channel: str, args: JSON) -> _Failure | None:
        queued = self._failures[method]
        if queued and (queued[0].when is None or queued[0].when(args)):
            return queued.popleft()
        if method in self._workspace_limits:
            wait = self._workspace_wait(method)
            if wait is not None:
                return _Failure("ratelimited", 429, wait)
        if method in self._limits and channel and not self._within_limit(method, channel):
            return _Failure("ratelimited", 429, 1)
        if method == "chat.postMessage" and channel in self.not_joined:
            return _Failure("not_in_channel", 200, None)
        return None

    def _within_limit(self, method: str, channel: str) -> bool:
        now = time.monotonic()
        window = self._windows[(method, channel)]
        while window and window[0] <= now - 1.0:
            window.popleft()
        if len(window) >= self._limits[method]:
            return False
        window.append(now)
        return True

    def _workspace_wait(self, method: str) -> int | None:
        """None when the call fits the workspace's minute, else Retry-After (whole seconds)."""
        now = time.monotonic()
        window = self._workspace_windows[method]
        span = self._workspace_window
        while window and window[0] <= now - span:
            window.popleft()
        if len(window) >= self._workspace_limits[method]:
            return max(1, math.ceil(window[0] + span - now))
        window.append(now)
        return None

    async def _answer(self, method: str, args: JSON, failure: _Failure) -> web.Response:
        if failure.status == 429:
            self.rate_limited += 1
        await self._record(
            Call(method, args, time.monotonic(), failure.status, failure.error, failure.errors)
        )
        headers = (
            {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
        )
        body: JSON = {"ok": False, "error": failure.error, **failure.extra}
        if failure.errors:
            if not failure.messages_only:
                body["errors"] = list(failure.errors)
            body["response_metadata"] = {"messages": [f"[ERROR] {e}" for e in failure.errors]}
        return web.json_response(body, status=failure.status, headers=headers)

    async def _record(self, call: Call) -> None:
        self.records.append(call)

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        pending = self._pending.get(file_id)
        if pending is None:
            status, reply = 404, "file not found"
        elif len(data) != pending.length:
            status, reply = 400, f"expected {pending.length} bytes, got {len(data)}"
        else:
            pending.data = data
            self.uploads[file_id] = data
            status, reply = 200, f"OK - {len(data)}"
        error = None if status == 200 else reply
        await self._record(
            Call(
                "upload", {"file_id": file_id, "bytes": len(data)}, time.monotonic(), status, error
            )
        )
        return web.Response(status=status, text=reply)

    async def _response(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.responses.append((request.match_info["name"], body))
        await self._record(Call("response_url", body, time.monotonic(), 200, None))
        return web.Response(text="ok")

    # ---- methods --------------------------------------------------------------------------
    def _m_auth_test(self, args: JSON) -> JSON:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "reactbot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _m_chat_postMessage(self, args: JSON) -> JSON:
        ts = f"1700000000.{next(self._ts):06d}"
        thread = args.get("thread_ts") or None
        message = Message(
            str(args["channel"]), ts, str(args.get("text", "")), _blocks(args), thread
        )
        message.versions.append((time.monotonic(), message.text, message.blocks))
        self.messages[ts] = message
        return {
            "ok": True,
            "channel": message.channel,
            "ts": ts,
            "message": {"text": message.text, "ts": ts},
        }

    def _m_chat_update(self, args: JSON) -> JSON:
        message = self.messages.get(str(args.get("ts")))
        if message is None or message.channel != args.get("channel"):
            return {"ok": False, "error": "message_not_found"}
        message.text = str(args.get("text", ""))
        if "blocks" in args:  # absent: Slack keeps the message's blocks
            message.blocks = _blocks(args)
        message.versions.append((time.monotonic(), message.text, message.blocks))
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _view_refusal(self, args: JSON) -> _Failure | None:
        """What views.open answers for these arguments (before its handler opens the view)."""
        trigger = args.get("trigger_id")
        if not trigger and not args.get("interactivity_pointer"):
            # The error Slack's own docs show for it (slack-ruby/slack-api-ref views.open.json)
            return _Failure("invalid_arguments", 200, None, ("invalid `trigger_id`",), None, True)
        raw = args.get("view")
        try:
            view = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            view = None
        if not isinstance(view, dict):
            return _Failure(
                "invalid_arguments",
                200,
                None,
                ("must provide an object [json-pointer:/view]",),
                None,
                True,
            )
        if len(json.dumps(view, ensure_ascii=False).encode()) > VIEW_BYTES:
            return _Failure("view_too_large", 200, None)
        errors = validate_view(view)
        if errors:
            return _Failure("invalid_arguments", 200, None, tuple(errors), None, True)
        minted = self._triggers.get(str(trigger))
        if minted is None:
            return _Failure("invalid_trigger_id", 200, None)
        if trigger in self._exchanged:
            return _Failure("exchanged_trigger_id", 200, None)
        if time.monotonic() - minted > TRIGGER_TTL:
            return _Failure("expired_trigger_id", 200, None)
        return None

    def _m_views_open(self, args: JSON) -> JSON:
        trigger = str(args.get("trigger_id"))
        self._exchanged.add(trigger)
        raw = args["view"]
        view = json.loads(raw) if isinstance(raw, str) else raw
        opened = {
            "id": f"V{next(self._ts):08d}",
            "team_id": TEAM_ID,
            "state": {"values": {}},
            "hash": f"{time.time():.0f}.abc",
            "private_metadata": "",
            "callback_id": "",
            "root_view_id": None,
            "app_id": "A1",
            "bot_id": BOT_ID,
            **view,
        }
        opened["root_view_id"] = opened["id"]
        self.views.append(opened)
        return {"ok": True, "view": opened}

    def close_stream(self, ts: str) -> None:
        """Slack ends the stream on its own (too long, too old): later calls are refused."""
        self.streams[ts].streaming = False
        self.streams[ts].stopped_by_slack = True

    def _stream_refusal(self, method: str, args: JSON) -> _Failure | None:
        """What chat.startStream/appendStream/stopStream answer for these arguments."""
        errors: list[str] = []
        markdown = args.get("markdown_text")
        chunks = _json_arg(args.get("chunks"))
        if markdown is not None and chunks is not None:
            errors.append("markdown_text and chunks cannot be used together")
        if markdown is not None:
            if not isinstance(markdown, str):
                errors.append("must be a string [json-pointer:/markdown_text]")
            elif len(markdown) > STREAM_MARKDOWN:
                errors.append(
                    f"must be less than {STREAM_MARKDOWN + 1} characters [json-pointer:/markdown_text]"
                )
        if errors:
            return _Failure("invalid_arguments", 200, None, tuple(errors))
        if chunks is not None and (chunk_errors := validate_chunks(chunks)):
            return _Failure("invalid_chunks", 200, None, tuple(chunk_errors))
        if method == "chat.appendStream" and not markdown and not chunks:
            return _Failure("no_text", 200, None)
        if method == "chat.stopStream" and "blocks" in args:
            blocks = _json_arg(args.get("blocks"))
            if not isinstance(blocks, list):
                return _Failure("invalid_blocks_format", 200, None)
            if block_errors_ := block_errors(blocks):
                return _Failure("invalid_blocks", 200, None, tuple(block_errors_))
        if method == "chat.startStream":
            return self._start_refusal(args)
        stream = self.streams.get(str(args.get("ts")))
        if stream is None or stream.channel != args.get("channel"):
            return _Failure("message_not_found", 200, None)
        if not stream.streaming:
            return _Failure("message_not_in_streaming_state", 200, None)
        grown = len(stream.markdown) + _stream_text_length(markdown, chunks)
        if self.stream_max_chars is not None and grown > self.stream_max_chars:
            self.close_stream(stream.ts)
            return _Failure("message_not_in_streaming_state", 200, None)
        return None

    def _start_refusal(self, args: JSON) -> _Failure | None:
        channel = str(args.get("channel") or "")
        if not channel:
            return _Failure("channel_not_found", 200, None)
        if channel in self.no_streaming:
            return _Failure("channel_type_not_supported", 200, None)
        if channel in self.not_joined:
            return _Failure("not_in_channel", 200, None)
        if not args.get("thread_ts"):
            return _Failure("invalid_arguments", 200, None, ("missing required field: thread_ts",))
        mode = args.get("task_display_mode", "timeline")
        if mode not in TASK_DISPLAY_MODES:
            return _Failure(
                "invalid_arguments",
                200,
                None,
                ("must be a valid enum value [json-pointer:/task_display_mode]",),
            )
        if not channel.startswith("D"):  # "Required when streaming to channels"
            if not args.get("recipient_user_id"):
                return _Failure("missing_recipient_user_id", 200, None)
            if not args.get("recipient_team_id"):
                return _Failure("missing_recipient_team_id", 200, None)
        return None

    def _m_chat_startStream(self, args: JSON) -> JSON:
        ts = f"1700000000.{next(self._ts):06d}"
        stream = Stream(
            channel=str(args["channel"]),
            ts=ts,
            thread_ts=str(args["thread_ts"]),
            recipient_user_id=args.get("recipient_user_id"),
            recipient_team_id=args.get("recipient_team_id"),
            task_display_mode=str(args.get("task_display_mode", "timeline")),
        )
        self.streams[ts] = stream
        self._stream_content(stream, args)
        return {"ok": True, "channel": stream.channel, "ts": ts}

    def _m_chat_appendStream(self, args: JSON) -> JSON:
        stream = self.streams[str(args["ts"])]
        self._stream_content(stream, args)
        return {"ok": True, "channel": stream.channel, "ts": stream.ts}

    def _m_chat_stopStream(self, args: JSON) -> JSON:
        stream = self.streams[str(args["ts"])]
        self._stream_content(stream, args)
        stream.streaming = False
        if "blocks" in args:
            stream.blocks = list(_json_arg(args["blocks"]))
        return {
            "ok": True,
            "channel": stream.channel,
            "ts": stream.ts,
            "message": {"text": stream.markdown, "ts": stream.ts, "type": "message"},
        }

    def _stream_content(self, stream: Stream, args: JSON) -> None:
        markdown = args.get("markdown_text")
        if isinstance(markdown, str):
            stream.markdown += markdown
        for chunk in _json_arg(args.get("chunks")) or ():
            kind = chunk["type"]
            if kind == "markdown_text":
                stream.markdown += chunk["text"]
            elif kind == "task_update":
                stream.task_updates.append(chunk)
                stream.tasks[chunk["id"]] = {**stream.tasks.get(chunk["id"], {}), **chunk}
            elif kind == "plan_update":
                stream.plan_title = chunk["title"]

    def _m_assistant_threads_setStatus(self, args: JSON) -> JSON:
        problem = _thread_args(args, "status")
        if problem:
            return problem
        loading = _json_arg(args.get("loading_messages"))
        if loading is not None and (
            not isinstance(loading, list) or not all(isinstance(m, str) for m in loading)
        ):
            return {"ok": False, "error": "invalid_arguments"}
        thread = self._thread(args)
        thread.setdefault("statuses", []).append((str(args["status"]), loading or []))
        return {"ok": True}

    def _m_assistant_threads_setTitle(self, args: JSON) -> JSON:
        problem = _thread_args(args, "title")
        if problem:
            return problem
        self._thread(args)["title"] = str(args["title"])
        return {"ok": True}

    def _m_assistant_threads_setSuggestedPrompts(self, args: JSON) -> JSON:
        prompts = _json_arg(args.get("prompts"))
        if not args.get("channel_id"):
            return {"ok": False, "error": "channel_not_found"}
        if (
            not isinstance(prompts, list)
            or not prompts
            or len(prompts) > 4  # "set up to four suggested prompts"
            or not all(
                isinstance(p, dict)
                and isinstance(p.get("title"), str)
                and p["title"]
                and isinstance(p.get("message"), str)
                and p["message"]
                for p in prompts
            )
        ):
            return {"ok": False, "error": "invalid_arguments"}
        thread = self._thread(args)
        thread["prompts"] = prompts
        if args.get("title"):
            thread["prompts_title"] = args["title"]
        return {"ok": True}

    def _thread(self, args: JSON) -> JSON:
        key = (str(args.get("channel_id")), str(args.get("thread_ts") or ""))
        return self.assistant_threads.setdefault(key, {})

    def _m_chat_postEphemeral(self, args: JSON) -> JSON:
        return {"ok": True, "message_ts": f"1700000000.{next(self._ts):06d}"}

    def _m_conversations_info(self, args: JSON) -> JSON:
        """The conversation object Slack returns (https://docs.slack.dev/reference/methods/
        conversations.info): ``channel`` is required and must name a conversation the token
        may see, else ``channel_not_found`` ("Value passed for channel was invalid"); a
        private channel or group DM the bot is not in is not found either (Slack hides them
        from non-members). The scope by kind is checked before (``_missing_scope``)."""
        channel = str(args.get("channel") or "")
        kind = self._kind(channel)
        if kind is None or (kind in ("private", "mpim") and channel in self.not_joined):
            return {"ok": False, "error": "channel_not_found"}
        found: JSON = {
            "id": channel,
            "is_channel": kind in ("public", "private"),
            "is_group": kind == "private",
            "is_im": kind == "im",
            "is_mpim": kind == "mpim",
            "is_private": kind != "public",
            "is_member": channel not in self.not_joined,
            "is_archived": False,
            "is_shared": channel in self.shared_channels,
            "is_ext_shared": channel in self.shared_channels,
            "is_org_shared": False,
            "is_pending_ext_shared": False,
        }
        if kind != "im" and channel in self.channel_names:
            found["name"] = self.channel_names[channel]
        return {"ok": True, "channel": found}

    def _kind(self, channel: str) -> str | None:
        """``public``, ``private``, ``mpim`` or ``im``; None for no conversation id."""
        if not re.fullmatch(r"[CGD][A-Z0-9]+", channel):
            return None
        if channel.startswith("D"):
            return "im"
        if channel in self.group_dms:
            return "mpim"
        if channel in self.private_channels or channel.startswith("G"):
            return "private"
        return "public"

    def _m_conversations_members(self, args: JSON) -> JSON:
        """Paged like Slack: ``limit`` (default 100, at most 1000) members per page and an
        opaque ``next_cursor`` ("" on the last page); an unknown channel is not found."""
        channel = str(args.get("channel", ""))
        if channel not in self.channel_members:
            return {"ok": False, "error": "channel_not_found"}
        members = self.channel_members[channel]
        limit = min(max(int(args.get("limit") or 100), 1), 1000)
        cursor = str(args.get("cursor") or "")
        start = int(cursor.removeprefix("page-")) if cursor.startswith("page-") else 0
        page = members[start : start + limit]
        after = start + limit
        next_cursor = f"page-{after}" if after < len(members) else ""
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": next_cursor}}

    # ---- reading history (conversations.replies / conversations.history, users.info) -----
    def add_message(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None, name: str = ""
    ) -> str:
        """A person's message (what the bot would read back), in ``channel`` or a thread."""
        ts = f"1700000000.{next(self._ts):06d}"
        self.messages[ts] = Message(channel, ts, text, [], thread_ts, user=user)
        if name:
            self.users[user] = name
        return ts

    def _missing_scope(self, method: str, channel: str) -> JSON | None:
        """``needed`` and ``provided`` when the token lacks the scope ``method`` needs here."""
        needed = _needed_scope(method, channel)
        if method == "conversations.info":  # "channels:, groups:, im: or mpim: scopes
            # corresponding to the conversation type"
            kind = self._kind(channel)
            needed = _INFO_SCOPES.get(kind) if kind is not None else None
        if needed is None or needed in self.scopes:
            return None
        return {"needed": needed, "provided": ",".join(sorted(self.scopes))}

    def _m_conversations_replies(self, args: JSON) -> JSON:
        """A thread oldest first, its parent included (``ts`` the parent's); ``limit`` up to
        1000, ``latest``/``oldest`` bounds (``inclusive``), paged by ``cursor``."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        if not channel or not ts:
            return {"ok": False, "error": "invalid_arguments"}
        if channel in self.not_joined:
            return {"ok": False, "error": "not_in_channel"}
        parent = self.messages.get(ts)
        if parent is None or parent.channel != channel:
            return {"ok": False, "error": "thread_not_found"}
        found = [parent, *(m for m in self.replies(channel, ts) if m.ts != ts)]
        return self._page(_within(found, args), args, maximum=1000)

    def _m_conversations_history(self, args: JSON) -> JSON:
        """A channel's top-level messages, newest first; ``limit`` up to 999 (default 100)."""
        channel = str(args.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel in self.not_joined:
            return {"ok": False, "error": "not_in_channel"}
        top = [m for m in self.messages.values() if m.channel == channel and m.thread_ts is None]
        found = sorted(_within(top, args), key=lambda m: float(m.ts), reverse=True)
        return self._page(found, args, maximum=999)

    def _page(self, found: list[Message], args: JSON, *, maximum: int) -> JSON:
        limit = min(max(int(args.get("limit") or 100), 1), maximum)
        cursor = str(args.get("cursor") or "")
        start = int(cursor.removeprefix("page-")) if cursor.startswith("page-") else 0
        page = found[start : start + limit]
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": [_history_message(m) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": f"page-{start + limit}" if more else ""},
        }

    def _m_users_info(self, args: JSON) -> JSON:
        user = str(args.get("user") or "")
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        name = self.users[user]
        return {
            "ok": True,
            "user": {
                "id": user,
                "name": name,
                "profile": {"display_name": name, "real_name": name},
            },
        }

    def _m_files_getUploadURLExternal(self, args: JSON) -> JSON:
        # https://docs.slack.dev/reference/methods/files.getUploadURLExternal: `length` and
        # `filename` are required; missing_argument "typically only occurs when the length
        # provided is 0".
        try:
            length = int(args.get("length") or 0)
        except (TypeError, ValueError):
            length = 0
        filename = str(args.get("filename") or "")
        if length <= 0 or not filename:
            return {"ok": False, "error": "missing_argument"}
        file_id = f"F{next(self._ts):08d}"
        self._pending[file_id] = _Upload(filename, length)
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, args: JSON) -> JSON:
        # file_not_found: "Could not find the file from the upload ticket."
        files = args.get("files")
        try:
            parsed = json.loads(files) if isinstance(files, str) else files
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        if not isinstance(parsed, list) or not parsed:
            return {"ok": False, "error": "invalid_arguments"}
        for item in parsed:
            pending = self._pending.get(str(item.get("id", "")) if isinstance(item, dict) else "")
            if pending is None or pending.data is None:
                return {"ok": False, "error": "file_not_found"}
        for item in parsed:
            done = self._pending.pop(item["id"])
            self.shared_files.append(
                {
                    "id": item["id"],
                    "filename": done.filename,
                    "title": item.get("title", ""),
                    "data": done.data,
                    "channel_id": args.get("channel_id"),
                    "thread_ts": args.get("thread_ts"),
                }
            )
        return {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in parsed]}


BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "files:read",
    "files:write",
    "groups:history",
    "groups:read",
    "im:history",
    "mpim:history",
    "users:read",
)
"""The scopes the fake's token has unless a test takes one away (``fake.scopes``)."""

_HISTORY_METHODS = frozenset({"conversations.history", "conversations.replies"})
_INFO_SCOPES = {
    "public": "channels:read",
    "private": "groups:read",
    "mpim": "mpim:read",
    "im": "im:read",
}


def _needed_scope(method: str, channel: str) -> str | None:
    """The scope a reading method needs in ``channel``, by its kind (the id's first letter:
    C public, G private, D a DM); None for methods the fake does not check."""
    if method == "users.info":
        return "users:read"
    if method in ("files.getUploadURLExternal", "files.completeUploadExternal"):
        return "files:write"
    if method not in _HISTORY_METHODS:
        return None
    return {"G": "groups:history", "D": "im:history"}.get(channel[:1], "channels:history")


def _within(found: Sequence[Message], args: JSON) -> list[Message]:
    """The messages between ``oldest`` and ``latest`` (each end only with ``inclusive``)."""
    inclusive = str(args.get("inclusive") or "").lower() in ("1", "true")
    latest = float(args["latest"]) if args.get("latest") else math.inf
    oldest = float(args["oldest"]) if args.get("oldest") else -math.inf
    kept = []
    for m in found:
        at = float(m.ts)
        if (oldest < at < latest) or (inclusive and at in (oldest, latest)):
            kept.append(m)
    return kept


def _history_message(m: Message) -> JSON:
    """A message as conversations.history / replies return it (the bot's carry ``bot_id``)."""
    data: JSON = {"type": "message", "ts": m.ts, "text": m.text, "user": m.user}
    if m.user == BOT_USER_ID:
        data["bot_id"] = BOT_ID
    if m.blocks:
        data["blocks"] = m.blocks
    if m.thread_ts is not None:
        data["thread_ts"] = m.thread_ts
    if m.subtype:
        data["subtype"] = m.subtype
    return data


async def _read_args(request: web.Request) -> JSON:
    args: JSON = dict(request.query)
    if request.content_type == "application/json":
        args.update(await request.json())
    elif request.can_read_body:
        args.update(dict(await request.post()))
    return args


def _json_arg(value: Any) -> Any:
    """An argument slack_sdk sent as JSON, or as a JSON string in a form."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _thread_args(args: JSON, field_name: str) -> JSON | None:
    if not args.get("channel_id"):
        return {"ok": False, "error": "channel_not_found"}
    if not args.get("thread_ts"):
        return {"ok": False, "error": "invalid_thread_ts"}
    if not isinstance(args.get(field_name), str):
        return {"ok": False, "error": "invalid_arguments"}
    return None


def _stream_text_length(markdown: Any, chunks: Any) -> int:
    size = len(markdown) if isinstance(markdown, str) else 0
    for chunk in chunks or ():
        if chunk.get("type") == "markdown_text":
            size += len(chunk["text"])
    return size


def validate_chunks(chunks: Any) -> list[str]:
    """Why Slack would refuse these streaming chunks (``invalid_chunks``), as
    ``"... [json-pointer:/chunks/..]"`` lines; empty when it would take them."""
    checker = _Checker()
    if not isinstance(chunks, list):
        return ["must be an array [json-pointer:/chunks]"]
    if not chunks:
        return ["must contain at least 1 items [json-pointer:/chunks]"]
    for i, chunk in enumerate(chunks):
        at = f"/chunks/{i}"
        if not isinstance(chunk, dict):
            checker.fail("must provide an object", at)
            continue
        kind = chunk.get("type")
        allowed = _CHUNK_KEYS.get(kind) if isinstance(kind, str) else None
        if allowed is None:
            checker.fail("failed to match all allowed schemas", at)
            continue
        checker._extra(chunk, allowed, at)
        if kind == "markdown_text":
            text = chunk.get("text")
            if not isinstance(text, str):
                checker.fail("missing required field: text", at)
            else:
                checker._string_length(text, STREAM_MARKDOWN, f"{at}/text")
        elif kind == "plan_update":
            _required_string(checker, chunk, "title", at)
        elif kind == "task_update":
            _required_string(checker, chunk, "id", at, limit=ID_LENGTH)
            _required_string(checker, chunk, "title", at)
            if chunk.get("status") not in TASK_STATUSES:
                checker.fail("must be a valid enum value", f"{at}/status")
            for key in ("details", "output"):
                checker._length(chunk, key, TASK_FIELD, at)
            _sources(checker, chunk.get("sources"), f"{at}/sources")
        elif kind == "blocks":
            blocks = chunk.get("blocks")
            if not isinstance(blocks, list):
                checker.fail("missing required field: blocks", at)
            else:
                for j, block in enumerate(blocks):
                    checker.block(block, f"{at}/blocks/{j}")
    return checker.errors


def _required_string(
    checker: _Checker, obj: JSON, key: str, at: str, *, limit: int = TASK_FIELD
) -> None:
    if key not in obj:
        checker.fail(f"missing required field: {key}", at)
    else:
        checker._length(obj, key, limit, at)


def _sources(checker: _Checker, sources: Any, at: str) -> None:
    if sources is None:
        return
    if not isinstance(sources, list):
        checker.fail("must be an array", at)
        return
    for i, source in enumerate(sources):
        where = f"{at}/{i}"
        if not isinstance(source, dict) or source.get("type") != "url":
            checker.fail("failed to match all allowed schemas", where)
            continue
        checker._extra(source, frozenset({"type", "url", "text"}), where)
        for key in ("url", "text"):  # no documented length limit (UrlSourceElement)
            value = source.get(key)
            if key not in source:
                checker.fail(f"missing required field: {key}", where)
            elif not isinstance(value, str) or not value:
                checker.fail("must be more than 0 characters", f"{where}/{key}")


def _blocks(args: JSON) -> list[JSON]:
    blocks = args.get("blocks") or []
    parsed = json.loads(blocks) if isinstance(blocks, str) else blocks
    return list(parsed)


def message_text(message: Message) -> str:
    """Everything visible in a message, joined (for assertions)."""
    parts = [message.text]
    for block in message.blocks:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        for element in block.get("elements", ()):
            text = element.get("text") if isinstance(element, dict) else None
            if isinstance(text, dict):  # a button's label
                text = text.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


# ---- validation -----------------------------------------------------------------------------


def validate_message(args: JSON) -> tuple[str, list[str]] | None:
    """Why Slack would refuse these ``chat.postMessage``/``chat.update``/``chat.postEphemeral``
    arguments: ``(error, errors)``, ``errors`` being the ``"... [json-pointer:/blocks/..]"``
    lines Slack sends with ``invalid_blocks``; ``None`` when Slack would take them.

    The wording of the lines is Slack's, as seen in its answers: "must be less than 3001
    characters", "must be more than 0 characters", "no more than 50 items allowed", "failed to
    match all allowed schemas", "invalid additional property: emoji", "must provide an
    object", "missing required field: text", "must be a valid enum value", "`action_id` ...
    already exists". Characters are counted as code points.
    """
    blocks: list[Any] | None = None
    raw = args.get("blocks")
    if raw is not None:
        try:
            parsed = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return "invalid_blocks_format", []
        if not isinstance(parsed, list):
            return "invalid_blocks_format", []
        blocks = parsed
        errors = block_errors(blocks)
        if errors:
            return "invalid_blocks", errors
        if blocks_text_length(blocks) > BLOCKS_TEXT:
            return "msg_blocks_too_long", []
    text = args.get("text")
    if text is not None and not isinstance(text, str):
        return "invalid_arguments", ["must be a string [json-pointer:/text]"]
    if text and len(text) > TEXT_LIMIT:
        return "msg_too_long", []
    if not text and not blocks:
        return "no_text", []
    return None


def blocks_text_length(blocks: Sequence[Any]) -> int:
    """Characters of every ``text`` string anywhere in the blocks (what msg_blocks_too_long
    counts, as far as anyone outside Slack can tell)."""
    return sum(len(s) for s in _texts(blocks))


def _texts(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from _texts(value)
    elif isinstance(node, list):
        for item in node:
            yield from _texts(item)


def block_errors(blocks: Sequence[Any]) -> list[str]:
    checker = _Checker()
    if len(blocks) > MAX_BLOCKS:
        checker.fail(f"no more than {MAX_BLOCKS} items allowed", "/blocks")
    for i, block in enumerate(blocks):
        checker.block(block, f"/blocks/{i}")
    return checker.errors


_VIEW_KEYS = frozenset(
    {
        "type",
        "title",
        "blocks",
        "close",
        "submit",
        "private_metadata",
        "callback_id",
        "clear_on_close",
        "notify_on_close",
        "external_id",
        "submit_disabled",
    }
)


def validate_view(view: Any) -> list[str]:
    """Why Slack would refuse this modal ``view`` in ``views.open``: the ``"... [json-pointer:
    /view/..]"`` lines it sends with ``invalid_arguments`` (led, as in Slack's answers, by
    "failed to match all allowed schemas [json-pointer:/view]"); ``[]`` when it would open it.
    The limits and where each was confirmed are at ``VIEW_TITLE`` and below. The wording for
    numbers out of range ("must be between ...") is the fake's own; Slack's is not on record."""
    checker = _Checker(surface="modal")
    at = "/view"
    if not isinstance(view, dict):
        return [f"must provide an object [json-pointer:{at}]"]
    checker._extra(view, _VIEW_KEYS, at)
    if view.get("type") != "modal":
        checker.fail("must be a valid enum value", f"{at}/type")
    if "title" not in view:
        checker.fail("missing required field: title", at)
    for key in ("title", "close", "submit"):
        if key in view:
            checker.text(view[key], f"{at}/{key}", limit=VIEW_TITLE, plain_only=True)
    for key, limit in (
        ("private_metadata", PRIVATE_METADATA),
        ("callback_id", CALLBACK_ID),
        ("external_id", CALLBACK_ID),
    ):
        if view.get(key) != "":  # Slack's own answers carry them empty
            checker._length(view, key, limit, at)
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        checker.fail("missing required field: blocks" if blocks is None else "must be an array", at)
        blocks = []
    elif not blocks:
        checker.fail("must contain at least 1 items", f"{at}/blocks")
    if len(blocks) > VIEW_BLOCKS:
        checker.fail(f"no more than {VIEW_BLOCKS} items allowed", f"{at}/blocks")
    for i, block in enumerate(blocks):
        checker.block(block, f"{at}/blocks/{i}")
    has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in blocks)
    if has_input and "submit" not in view:
        checker.fail("missing required field: submit", at)
    if checker.errors:
        checker.errors.insert(0, f"failed to match all allowed schemas [json-pointer:{at}]")
    return checker.errors


_BLOCK_KEYS: dict[str, frozenset[str]] = {
    "section": frozenset({"type", "block_id", "text", "fields", "accessory", "expand"}),
    "context": frozenset({"type", "block_id", "elements"}),
    "actions": frozenset({"type", "block_id", "elements"}),
    "header": frozenset({"type", "block_id", "text"}),
    "divider": frozenset({"type", "block_id"}),
    "markdown": frozenset({"type", "block_id", "text"}),
    "context_actions": frozenset({"type", "block_id", "elements"}),
}
_FEEDBACK_KEYS = frozenset({"type", "action_id", "positive_button", "negative_button"})
_FEEDBACK_BUTTON_KEYS = frozenset({"text", "value", "accessibility_label"})
_INPUT_KEYS = frozenset(
    {"type", "block_id", "label", "element", "hint", "optional", "dispatch_action"}
)
_TEXT_INPUT_KEYS = frozenset(
    {
        "type",
        "action_id",
        "initial_value",
        "multiline",
        "min_length",
        "max_length",
        "placeholder",
        "dispatch_action_config",
        "focus_on_load",
    }
)
_BUTTON_KEYS = frozenset(
    {"type", "text", "action_id", "url", "value", "style", "confirm", "accessibility_label"}
)
_IMAGE_KEYS = frozenset({"type", "image_url", "alt_text", "slack_file"})


class _Checker:
    def __init__(self, *, surface: str = "message") -> None:
        self.errors: list[str] = []
        self.surface = surface
        """``modal``: input blocks are allowed (views take them; these checks keep messages
        to what the renderer sends)."""
        self._action_ids: set[str] = set()

    def fail(self, message: str, at: str) -> None:
        self.errors.append(f"{message} [json-pointer:{at}]")

    # ---- blocks ---------------------------------------------------------------------------
    def block(self, block: Any, at: str) -> None:
        if not isinstance(block, dict):
            self.fail("must provide an object", at)
            return
        kind = block.get("type")
        allowed = _BLOCK_KEYS.get(kind) if isinstance(kind, str) else None
        if kind == "input" and self.surface == "modal":
            allowed = _INPUT_KEYS
        if allowed is None:
            self.fail("failed to match all allowed schemas", at)
            return
        self._extra(block, allowed, at)
        self._length(block, "block_id", ID_LENGTH, at)
        getattr(self, f"_{kind}")(block, at)

    def _section(self, block: JSON, at: str) -> None:
        if "text" not in block and "fields" not in block:
            self.fail("missing required field: text", at)
        if "text" in block:
            self.text(block["text"], f"{at}/text", limit=SECTION_TEXT)
        if "fields" in block:
            fields = block["fields"]
            if not isinstance(fields, list):
                self.fail("must be an array", f"{at}/fields")
                return
            if len(fields) > SECTION_FIELDS:
                self.fail(f"no more than {SECTION_FIELDS} items allowed", f"{at}/fields")
            for i, item in enumerate(fields):
                self.text(item, f"{at}/fields/{i}", limit=SECTION_FIELD_TEXT)
        if "accessory" in block:
            self.element(block["accessory"], f"{at}/accessory")

    def _context(self, block: JSON, at: str) -> None:
        elements = self._elements(block, at, CONTEXT_ELEMENTS)
        for i, element in enumerate(elements):
            where = f"{at}/elements/{i}"
            if isinstance(element, dict) and element.get("type") == "image":
                self.element(element, where)
            else:
                self.text(element, where, limit=TEXT_OBJECT)

    def _actions(self, block: JSON, at: str) -> None:
        for i, element in enumerate(self._elements(block, at, ACTIONS_ELEMENTS)):
            self.element(element, f"{at}/elements/{i}")

    def _header(self, block: JSON, at: str) -> None:
        if "text" not in block:
            self.fail("missing required field: text", at)
            return
        self.text(block["text"], f"{at}/text", limit=HEADER_TEXT, plain_only=True)

    def _divider(self, block: JSON, at: str) -> None:
        pass

    def _input(self, block: JSON, at: str) -> None:
        if "label" not in block:
            self.fail("missing required field: label", at)
        else:
            self.text(block["label"], f"{at}/label", limit=INPUT_LABEL, plain_only=True)
        if "hint" in block:
            self.text(block["hint"], f"{at}/hint", limit=INPUT_HINT, plain_only=True)
        for flag in ("optional", "dispatch_action"):
            if flag in block and not isinstance(block[flag], bool):
                self.fail("must be a boolean", f"{at}/{flag}")
        element = block.get("element")
        if element is None:
            self.fail("missing required field: element", at)
        elif not isinstance(element, dict) or element.get("type") != "plain_text_input":
            # The only input element these tests need; others are refused rather than trusted.
            self.fail("failed to match all allowed schemas", f"{at}/element")
        else:
            self._text_input(element, f"{at}/element")

    def _text_input(self, element: JSON, at: str) -> None:
        self._extra(element, _TEXT_INPUT_KEYS, at)
        self._length(element, "action_id", ID_LENGTH, at)
        if "initial_value" in element and not isinstance(element["initial_value"], str):
            self.fail("must be a string", f"{at}/initial_value")
        for flag in ("multiline", "focus_on_load"):
            if flag in element and not isinstance(element[flag], bool):
                self.fail("must be a boolean", f"{at}/{flag}")
        for key, (low, high) in (
            ("min_length", INPUT_MIN_LENGTH),
            ("max_length", INPUT_MAX_LENGTH),
        ):
            if key not in element:
                continue
            value = element[key]
            if not isinstance(value, int) or isinstance(value, bool):
                self.fail("must be an integer", f"{at}/{key}")
            elif not low <= value <= high:
                self.fail(f"must be between {low} and {high}", f"{at}/{key}")
        if "placeholder" in element:
            self.text(
                element["placeholder"], f"{at}/placeholder", limit=PLACEHOLDER, plain_only=True
            )

    def _markdown(self, block: JSON, at: str) -> None:
        text = block.get("text")
        if not isinstance(text, str):
            self.fail("missing required field: text", at)
        else:
            self._string_length(text, MARKDOWN_BLOCK_TEXT, f"{at}/text")

    def _context_actions(self, block: JSON, at: str) -> None:
        for i, element in enumerate(self._elements(block, at, CONTEXT_ACTIONS_ELEMENTS)):
            where = f"{at}/elements/{i}"
            if not isinstance(element, dict) or element.get("type") != "feedback_buttons":
                # icon_button is allowed too; the bot sends none, so the fake refuses it
                self.fail("failed to match all allowed schemas", where)
                continue
            self._extra(element, _FEEDBACK_KEYS, where)
            self._length(element, "action_id", ID_LENGTH, where)
            for side in ("positive_button", "negative_button"):
                button = element.get(side)
                if not isinstance(button, dict):
                    self.fail(f"missing required field: {side}", where)
                    continue
                self._extra(button, _FEEDBACK_BUTTON_KEYS, f"{where}/{side}")
                if "text" not in button:
                    self.fail("missing required field: text", f"{where}/{side}")
                else:
                    self.text(
                        button["text"], f"{where}/{side}/text", limit=BUTTON_TEXT, plain_only=True
                    )
                if "value" not in button:
                    self.fail("missing required field: value", f"{where}/{side}")
                self._length(button, "value", BUTTON_VALUE, f"{where}/{side}")
                # "accessibility_label ... Maximum length is 75 characters" (the element's page)
                self._length(button, "accessibility_label", BUTTON_TEXT, f"{where}/{side}")

    def _elements(self, block: JSON, at: str, limit: int) -> list[Any]:
        elements = block.get("elements")
        if elements is None:
            self.fail("missing required field: elements", at)
            return []
        if not isinstance(elements, list):
            self.fail("must be an array", f"{at}/elements")
            return []
        if not elements:
            self.fail("must contain at least 1 items", f"{at}/elements")
        if len(elements) > limit:
            self.fail(f"no more than {limit} items allowed", f"{at}/elements")
        return elements

    # ---- elements and text objects --------------------------------------------------------
    def element(self, element: Any, at: str) -> None:
        if not isinstance(element, dict):
            self.fail("must provide an object", at)
            return
        kind = element.get("type")
        if kind == "button":
            self._extra(element, _BUTTON_KEYS, at)
            if "text" not in element:
                self.fail("missing required field: text", at)
            else:
                self.text(element["text"], f"{at}/text", limit=BUTTON_TEXT, plain_only=True)
            self._length(element, "action_id", ID_LENGTH, at)
            self._length(element, "value", BUTTON_VALUE, at)
            self._length(element, "url", BUTTON_URL, at)
            style = element.get("style")
            if style is not None and style not in ("primary", "danger"):
                self.fail("must be a valid enum value", f"{at}/style")
            action_id = element.get("action_id")
            if isinstance(action_id, str):
                if action_id in self._action_ids:
                    self.fail(f'`action_id` "{action_id}" already exists', f"{at}/action_id")
                self._action_ids.add(action_id)
        elif kind == "image":
            self._extra(element, _IMAGE_KEYS, at)
            if "alt_text" not in element:
                self.fail("missing required field: alt_text", at)
            self._length(element, "alt_text", 2000, at)
            self._length(element, "image_url", 3000, at)
        else:
            self.fail("failed to match all allowed schemas", at)

    def text(self, obj: Any, at: str, *, limit: int, plain_only: bool = False) -> None:
        if not isinstance(obj, dict):
            self.fail("must provide an object", at)
            return
        before = len(self.errors)
        kind = obj.get("type")
        if kind is None:
            self.fail("missing required field: type", at)
        elif kind not in (("plain_text",) if plain_only else ("plain_text", "mrkdwn")):
            self.fail("must be a valid enum value", f"{at}/type")
        allowed = {"type", "text", "emoji" if kind == "plain_text" else "verbatim"}
        self._extra(obj, frozenset(allowed), at)
        text = obj.get("text")
        if text is None:
            self.fail("missing required field: text", at)
        elif not isinstance(text, str):
            self.fail("must be a string", f"{at}/text")
        else:
            self._string_length(text, limit, f"{at}/text")
        if len(self.errors) > before and not plain_only:  # either schema could have matched
            self.errors.insert(before, f"failed to match all allowed schemas [json-pointer:{at}]")

    def _length(self, obj: JSON, key: str, limit: int, at: str) -> None:
        if key not in obj:
            return
        value = obj[key]
        if not isinstance(value, str):
            self.fail("must be a string", f"{at}/{key}")
        else:
            self._string_length(value, limit, f"{at}/{key}")

    def _string_length(self, value: str, limit: int, at: str) -> None:
        if not value:
            self.fail("must be more than 0 characters", at)
        elif len(value) > limit:
            self.fail(f"must be less than {limit + 1} characters", at)

    def _extra(self, obj: JSON, allowed: frozenset[str], at: str) -> None:
        for key in obj:
            if key not in allowed:
                self.fail(f"invalid additional property: {key}", at)
