"""The Telegram message a run is followed into, and the client's errors mapped once.

python-telegram-bot raises ``RetryAfter`` for a 429 (``parameters.retry_after``),
``BadRequest`` for a 400 with Telegram's description, ``Forbidden`` when the person blocked
the bot, ``TimedOut`` / ``NetworkError`` for the rest; ``adapters.live`` knows them as
``RateLimited``, ``EditRejected`` and ``EditDeferred``.
"""

from __future__ import annotations

import datetime as dtm
import logging
from collections.abc import Sequence

from telegram import (
    Bot,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
)
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from adapters import words
from adapters.live import EditDeferred, EditRejected, RateLimited
from adapters.pacing import EditPacer
from adapters.telegram.render import Document, TelegramPayload, inert
from core.speech import Speaker, SpeechError
from core.trace import Trace

log = logging.getLogger(__name__)

POST_ATTEMPTS = 5
NETWORK_BACKOFF = 1.0
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
"""A URL in model text must not unfold into a preview card of someone else's page."""


def retry_seconds(exc: RetryAfter) -> float:
    """``retry_after`` as seconds, whether the client gives an int or a timedelta."""
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def markup(payload: TelegramPayload) -> InlineKeyboardMarkup | ForceReply | None:
    if payload.prompt is not None:
        prompt = payload.prompt
        return ForceReply(selective=prompt.selective, input_field_placeholder=prompt.placeholder)
    if not payload.buttons:
        return None
    buttons = [InlineKeyboardButton(b.text, callback_data=b.data) for b in payload.buttons]
    return InlineKeyboardMarkup([buttons[i : i + 2] for i in range(0, len(buttons), 2)])


def inline(payload: TelegramPayload) -> InlineKeyboardMarkup | None:
    """An edited message takes inline buttons only (a ForceReply goes with a new one)."""
    shown = markup(payload)
    return shown if isinstance(shown, InlineKeyboardMarkup) else None


def mapped(exc: TelegramError) -> EditDeferred | EditRejected:
    """The live message's view of a client error."""
    if isinstance(exc, RetryAfter):
        return RateLimited(retry_seconds(exc))
    if isinstance(exc, BadRequest | Forbidden):
        return EditRejected(f"Telegram refused it: {exc.message}")
    return EditDeferred(NETWORK_BACKOFF, f"Telegram did not answer: {exc.message}")


def not_modified(exc: TelegramError) -> bool:
    return isinstance(exc, BadRequest) and "message is not modified" in exc.message.lower()


class Chat:
    """Sends into one chat (a forum topic of it, with ``thread``) within the pacer's
    allowance for the chat."""

    def __init__(
        self,
        bot: Bot,
        chat: int,
        pacer: EditPacer,
        thread: int | None = None,
        *,
        speaker: Speaker | None = None,
    ) -> None:
        self.bot = bot
        self.chat = chat
        self.pacer = pacer
        self.thread = thread
        self.speaker = speaker
        """Speaks the answers to voice questions (``tts.*``); None: they stay text."""

    @property
    def key(self) -> str:
        return f"telegram:{self.chat}"

    async def send(self, payload: TelegramPayload, *, reply_to: int | None = None) -> int:
        """Post ``payload`` (a reply to ``reply_to`` when it still exists); its message id.
        A 429 waits out its ``retry_after`` and tries again; a refusal raises."""
        replying = (
            ReplyParameters(reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        if payload.spoken is not None:
            payload = await self._spoken(payload.spoken)
        for attempt in range(POST_ATTEMPTS):
            async with self.pacer.slot(self.key, priority="first"):
                try:
                    sent = await self._post(payload, replying)
                except RetryAfter as exc:
                    self.pacer.rate_limit_hit(self.key, retry_seconds(exc))
                    if attempt == POST_ATTEMPTS - 1:
                        raise
                    continue
            return sent.message_id
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _spoken(self, answer: str) -> TelegramPayload:
        """The answer as a voice message (spoken once, before any retry), or the line that
        says it could not be."""
        if self.speaker is None:
            raise AssertionError("a spoken answer to send, but no speaker")
        try:
            audio = await self.speaker.speak(answer)
        except SpeechError as exc:
            log.warning("the answer in chat %s was not spoken: %s", self.chat, exc)
            return TelegramPayload(inert(words.NOT_SPOKEN))
        return TelegramPayload("", voice=Document("answer.ogg", audio))

    async def _post(self, payload: TelegramPayload, replying: ReplyParameters | None) -> Message:
        if payload.voice is not None:
            return await self.bot.send_voice(
                self.chat,
                InputFile(payload.voice.content, filename=payload.voice.name),
                message_thread_id=self.thread,
                reply_parameters=replying,
            )
        if payload.photo is not None:
            return await self.bot.send_photo(
                self.chat,
                InputFile(payload.photo.content, filename=payload.photo.name),
                message_thread_id=self.thread,
                reply_parameters=replying,
            )
        if payload.document is not None:
            return await self.bot.send_document(
                self.chat,
                InputFile(payload.document.content, filename=payload.document.name),
                caption=payload.html or None,
                parse_mode="HTML",
                message_thread_id=self.thread,
                reply_parameters=replying,
            )
        return await self.bot.send_message(
            self.chat,
            payload.html,
            parse_mode="HTML",
            reply_markup=markup(payload),
            link_preview_options=NO_PREVIEW,
            message_thread_id=self.thread,
            reply_parameters=replying,
        )


class TelegramSurface:
    """``adapters.live.Surface`` over one message the bot posted."""

    def __init__(self, chat: Chat, message_id: int) -> None:
        self.chat = chat
        self.message_id = message_id

    @property
    def channel_key(self) -> str:
        return self.chat.key

    async def edit(self, payload: TelegramPayload) -> None:
        try:
            await self.chat.bot.edit_message_text(
                payload.html,
                chat_id=self.chat.chat,
                message_id=self.message_id,
                parse_mode="HTML",
                reply_markup=inline(payload),
                link_preview_options=NO_PREVIEW,
            )
        except TelegramError as exc:
            if not_modified(exc):  # it already shows exactly this (never provoked on purpose)
                return
            raise mapped(exc) from exc

    async def post_trace(self, trace: Trace, posts: Sequence[TelegramPayload]) -> None:
        """Each of ``posts`` as a reply under the message, in order (the spoken answer only
        where answers are spoken: ``tts.*``)."""
        del trace
        for post in posts:
            if post.spoken is not None and self.chat.speaker is None:
                continue
            await self.chat.send(post, reply_to=self.message_id)
