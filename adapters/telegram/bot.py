"""Telegram on the shared pipeline: python-telegram-bot's ``Application`` polling for
updates, each question translated into an ``Ask``.

::

    getUpdates --(Application)--> a question: any text in a private chat; in a group a
                                  mention of the bot, a reply to one of its messages, /ask
      -> Ask (who: chat, topic and user; key telegram:<user>; place telegram:<chat>;
              conversation telegram:<chat>, or telegram:<chat>:<topic> in a forum topic)
      -> Answering.admit -> a Refusal (a reply saying so) or a Ticket
      -> Answering.answer(ticket, TelegramReply): a reply to the question, edited live
    a Stop button press -> answerCallbackQuery, always; may_stop; Answering.stop
    /reset -> the conversation's history and files forgotten

This module writes no admission code: access (``telegram.allowed_chats``) is its one rule,
handed to ``Answering`` with the policy every surface shares.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from telegram import MessageEntity, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from adapters.answering import (
    Answering,
    Approvers,
    Ask,
    Policy,
    Refusal,
    Ticket,
    may_decide,
    may_stop,
)
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.live import LiveMessage, RunView, Verbosity
from adapters.pacing import EditPacer
from adapters.telegram.render import (
    DECIDE_PREFIX,
    STOP_PREFIX,
    VERDICTS,
    TelegramPayload,
    TelegramRenderer,
    inert,
)
from adapters.telegram.surface import Chat, TelegramSurface
from core.agent import Agent, Run
from core.approval import ApprovalBroker, Decision, Verdict
from core.budgets import TokenBudgets
from core.errors import StoreUnavailable
from core.storage import Stores
from core.stores import RunRecord
from core.trace import Trace

log = logging.getLogger(__name__)

TelegramApp = Application[Any, Any, Any, Any, Any, Any]
EDIT_INTERVAL = 1.0
"""About one edit a second per chat: Telegram's advice for one chat."""
GROUP_WRITES = (20, 60.0)
"""A group takes at most 20 messages a minute (Telegram's bot FAQ); edits count too."""
GROUP_EDIT_INTERVAL = 3.0
GREETING = (
    "Ask me anything: I answer in one message you can watch me think in (thought, action, "
    "observation, answer). /reset forgets our conversation."
)
NOT_HERE = "This bot does not answer in this chat."
DEFAULT_API = "https://api.telegram.org/bot"
UPDATES = ["message", "callback_query"]


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    token: str = field(repr=False)
    api_base_url: str = DEFAULT_API
    """The Bot API prefix the token is appended to (a local Bot API server, a proxy, a fake)."""
    allowed_chats: frozenset[int] = frozenset()
    """Chats that may ask; empty: every private chat."""
    admins: frozenset[int] = frozenset()
    """User ids exempt from the cooldown, who may stop anyone's run."""
    verbosity: Verbosity = "full"
    cooldown_seconds: float = 5.0
    max_runs_per_user: int = 2
    max_concurrent_runs: int = 500
    run_lease: float = 240.0
    run_hold_at_most: float = 240.0
    approvers: Approvers = "asker"
    merge_window: float = 0.0
    poll_timeout: float = 10.0
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    """Where Telegram posts updates in webhook mode (``adapters.telegram.webhook``)."""
    webhook_secret: str | None = field(default=None, repr=False)
    """The ``secret_token`` given to ``setWebhook``, checked on every request."""
    """Seconds one getUpdates long poll waits for an update."""


@dataclass(frozen=True, slots=True)
class Asker:
    chat: int
    user: int
    message: int
    thread: int | None = None
    """The forum topic the question was asked in."""


def file_url(api_base_url: str) -> str:
    """Telegram's file host beside its API: ``…/bot`` -> ``…/file/bot``."""
    head, _, tail = api_base_url.rstrip("/").rpartition("/")
    return f"{head}/file/{tail}"


def telegram_application(settings: TelegramSettings) -> TelegramApp:
    """python-telegram-bot's ``Application`` for the bot (no I/O until it is initialised).
    ``PTB_TIMEDELTA``: ``RetryAfter`` carries a timedelta, as it will in the next major
    version, instead of warning on every 429."""
    os.environ.setdefault("PTB_TIMEDELTA", "true")
    builder: ApplicationBuilder[Any, Any, Any, Any, Any, Any] = (
        Application.builder()
        .token(settings.token)
        .base_url(settings.api_base_url)
        .base_file_url(file_url(settings.api_base_url))
    )
    return builder.build()


class TelegramReply:
    """``adapters.answering.Reply`` of one question in a private chat."""

    def __init__(self, bot: TelegramBot, asker: Asker) -> None:
        self._bot = bot
        self._asker = asker
        self._chat = bot.chat(asker.chat, asker.thread)
        self._message_id: int | None = None

    async def open(self, verbosity: Verbosity) -> str | None:
        del verbosity
        return conversation_of(self._asker.chat, self._asker.thread)

    def reading(self) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def show(self, run: Run, view: RunView) -> LiveMessage[TelegramPayload] | None:
        renderer = TelegramRenderer(
            run.trace.id, clock=time.monotonic, trace_link=self._bot.trace_link
        )
        try:
            message_id = await self._chat.send(renderer.live(view), reply_to=self._asker.message)
        except TelegramError:
            log.exception("could not post the answer's message in chat %s", self._asker.chat)
            return None
        self._message_id = message_id
        surface = TelegramSurface(self._chat, message_id)
        return LiveMessage(surface, renderer, self._chat.pacer, view=view, tick=1.0)

    async def note(self, text: str) -> None:
        await self._bot.say(self._asker, text)

    async def ended(self, run: Run) -> None:
        del run

    def where(self) -> dict[str, str]:
        """The answer's message, for a live process to finish it if this one dies."""
        if self._message_id is None:
            return {}
        return {"chat": str(self._asker.chat), "message": str(self._message_id)}


def conversation_of(chat: int, thread: int | None = None) -> str:
    """A private chat or group is one conversation; each forum topic is one of its own."""
    return f"telegram:{chat}" if thread is None else f"telegram:{chat}:{thread}"


def is_group(chat: int) -> bool:
    """Groups and supergroups have negative ids; a private chat's is the person's id."""
    return chat < 0


class TelegramBot:
    """The bot: its ``Application``, handlers and one ``Answering`` over the shared stores."""

    def __init__(
        self,
        agent: Agent,
        *,
        stores: Stores,
        budgets: TokenBudgets,
        choices: ChannelChoices,
        settings: TelegramSettings,
        broker: ApprovalBroker | None = None,
        files: ConversationFiles | None = None,
        application: TelegramApp | None = None,
        trace_link: Callable[[str], str | None] | None = None,
    ) -> None:
        self.settings = settings
        self.trace_link = trace_link
        self.broker = broker
        """The trace page of a run (``web.*``), named in the caption of its documents."""
        self.stores = stores
        self.files = files
        self.pacer = EditPacer(EDIT_INTERVAL)
        self.group_pacer = EditPacer(GROUP_EDIT_INTERVAL, channel_window=GROUP_WRITES)
        self.application = application or telegram_application(settings)
        self.answering: Answering[Asker] = Answering(
            agent,
            surface="telegram",
            access=self._access,
            policy=Policy.of(settings),
            stores=stores,
            budgets=budgets,
            choices=choices,
            files=files,
            broker=broker,
            empty_question="Send me a question as text.",
            quote=lambda text: text,  # every text is escaped when it is sent
            shutdown_by="a bot restart",
            merge_window=settings.merge_window,
            finalise=self._finish_orphan,
        )
        self._add_handlers()

    def _add_handlers(self) -> None:
        private, groups = filters.ChatType.PRIVATE, filters.ChatType.GROUPS
        app = self.application
        app.add_handler(CommandHandler("start", self.on_start, filters=private))
        app.add_handler(CommandHandler("reset", self.on_reset))
        app.add_handler(CommandHandler("ask", self.on_ask))
        app.add_handler(CommandHandler("trace", self.on_trace))
        app.add_handler(MessageHandler(private & filters.TEXT & ~filters.COMMAND, self.on_text))
        app.add_handler(MessageHandler(groups & filters.TEXT & ~filters.COMMAND, self.on_group))
        app.add_handler(CallbackQueryHandler(self.on_button))
        app.add_error_handler(self.on_error)

    def chat(self, chat: int, thread: int | None = None) -> Chat:
        pacer = self.group_pacer if is_group(chat) else self.pacer
        return Chat(self.application.bot, chat, pacer, thread)

    # ---- the process's life ---------------------------------------------------------------
    async def start(self) -> None:
        """Connect (getMe); then poll for updates until ``aclose``, or (webhook mode) tell
        Telegram where to post them (the webhook server puts them on the queue)."""
        await self.answering.start()
        app, s = self.application, self.settings
        await app.initialize()
        await app.start()
        if s.mode == "webhook":
            if s.webhook_url is None or s.webhook_secret is None:
                raise ValueError("webhook mode needs its URL and its secret")
            await app.bot.set_webhook(
                s.webhook_url, secret_token=s.webhook_secret, allowed_updates=UPDATES
            )
            return
        updater = app.updater
        assert updater is not None  # built with one (ApplicationBuilder's default)
        await updater.start_polling(timeout=int(s.poll_timeout), allowed_updates=UPDATES)

    async def aclose(self, *, grace: float = 5.0) -> None:
        """No new updates; running answers end as stopped (their final edits still go);
        then the client closes."""
        app = self.application
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        await self.answering.aclose(grace=grace)
        if app.running:
            await app.stop()
        await app.shutdown()

    # ---- handlers -------------------------------------------------------------------------
    async def _access(self, who: Asker) -> str | None:
        allowed = self.settings.allowed_chats
        return NOT_HERE if allowed and who.chat not in allowed else None

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """In a private chat every message is a question."""
        del context
        message = update.effective_message
        if message is not None and message.chat.type == ChatType.PRIVATE:
            await self._question(update, message.text or "")

    async def on_group(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """In a group only a mention of the bot, or a reply to one of its messages."""
        message, me = update.effective_message, context.bot
        if message is None or message.text is None:
            return
        replied = message.reply_to_message
        to_me = (
            replied is not None
            and replied.from_user is not None
            and (replied.from_user.id == me.id)
        )
        mention = f"@{me.username}".lower() if me.username else None
        mentioned = mention is not None and any(
            text.lower() == mention
            for entity, text in message.parse_entities([MessageEntity.MENTION]).items()
            if entity.type == MessageEntity.MENTION
        )
        if not (to_me or mentioned):
            return
        question = message.text
        if mention is not None:
            question = re.sub(re.escape(mention), " ", question, flags=re.IGNORECASE)
        await self._question(update, question)

    async def on_ask(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """``/ask QUESTION`` (``/ask@bot`` in groups), anywhere."""
        await self._question(update, " ".join(context.args or []))

    async def _question(self, update: Update, text: str) -> None:
        asker, user = _asker(update), update.effective_user
        if asker is None or user is None:
            return
        ask: Ask[Asker] = Ask(
            who=asker,
            user=str(user.id),
            key=f"telegram:{user.id}",
            name=user.username or user.full_name or str(user.id),
            admin=user.id in self.settings.admins,
            place=conversation_of(asker.chat),
            question=text.strip(),
            ident=f"telegram:{asker.chat}:{asker.message}",
            channel_name=_chat_name(update),
        )
        admitted = await self.answering.admit(ask)
        if isinstance(admitted, Refusal):
            await self.say(asker, admitted.text)
            return
        self.answering.spawn(self._answer(admitted, asker))

    async def _answer(self, ticket: Ticket[Asker], asker: Asker) -> None:
        await self.answering.answer(ticket, TelegramReply(self, asker))

    async def on_start(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        del context
        if (asker := _asker(update)) is not None:
            await self.say(asker, GREETING)

    async def on_reset(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Forgets the conversation (the group's or the topic's): in a group, for admins
        only, as the other surfaces' channel-wide commands are."""
        del context
        if (asker := _asker(update)) is None:
            return
        refused = await self.answering.refusal(asker)
        if refused is None and is_group(asker.chat) and asker.user not in self.settings.admins:
            refused = "Only an admin can reset a group's conversation."
        if refused is not None:
            await self.say(asker, refused)
            return
        conversation = conversation_of(asker.chat, asker.thread)
        await self.stores.history.clear(conversation)
        if self.files is not None:
            await self.files.clear(conversation)
        await self.say(asker, "🧹 I have forgotten our conversation.")

    async def on_trace(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The conversation's last trace, as its ``.md`` and ``.json`` documents."""
        del context
        if (asker := _asker(update)) is None:
            return
        if (refused := await self.answering.refusal(asker)) is not None:
            await self.say(asker, refused)
            return
        try:
            traces = await self.stores.traces.list(conversation_of(asker.chat, asker.thread))
        except StoreUnavailable:
            await self.say(asker, "I cannot read the traces now: the store is unavailable.")
            return
        if not traces:
            await self.say(asker, "No answer here has a trace yet: ask me something first.")
            return
        renderer = TelegramRenderer(traces[0].id, clock=time.monotonic, trace_link=self.trace_link)
        chat = self.chat(asker.chat, asker.thread)
        try:
            for post in renderer.documents(traces[0]):
                await chat.send(post, reply_to=asker.message)
        except TelegramError:
            log.warning("could not send the trace in chat %s", asker.chat, exc_info=True)

    async def on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Every press is answered (answerCallbackQuery), whatever it asked for: an
        unanswered one leaves the person's button spinning."""
        del context
        query = update.callback_query
        if query is None:
            return
        words: str | None = None
        try:
            words = await self._pressed(query.data or "", query.from_user.id, query.from_user)
        finally:
            try:
                await query.answer(words)
            except TelegramError:
                log.warning("could not answer the callback query %s", query.id, exc_info=True)

    async def _pressed(self, data: str, user_id: int, user: Any) -> str | None:
        """Stop, pressed at whichever process Telegram reached: the asker is in the button,
        and ``Answering.stop`` forwards to the process running it."""
        if data.startswith(DECIDE_PREFIX):
            return await self._decided(data, user_id, user)
        if not data.startswith(STOP_PREFIX):
            return "That button is not one of mine."
        run_id, _, asker = data.removeprefix(STOP_PREFIX).partition(":")
        ask = self.answering.ask_of(run_id)
        admin = user_id in self.settings.admins
        if not may_stop(user=str(user_id), asker=ask.user if ask else asker or None, admin=admin):
            return "Only the person who asked can stop it."
        by = user.username or user.full_name or str(user_id)
        if not await self.answering.stop(run_id, by=by, by_id=str(user_id)):
            return "That answer is no longer running."
        return "Stopping…"

    async def _decided(self, data: str, user_id: int, user: Any) -> str:
        """Approve, Deny or Always allow, pressed under an action waiting for a person
        (``agent.approval.approvers`` decides who may); the broker reaches the run's process."""
        try:
            verdict, run_id, step, call, asker = data.removeprefix(DECIDE_PREFIX).split(":")
            key = (run_id, int(step), int(call))
        except ValueError:
            return "That button is not one of mine."
        if self.broker is None or verdict not in VERDICTS:
            return "Approvals are not set up on this bot."
        if await self.broker.request(key) is None:
            return "This action was already decided, or its time ran out."
        admin = user_id in self.settings.admins
        if not may_decide(self.settings.approvers, user=str(user_id), asker=asker or None,
                          admin=admin):  # fmt: skip
            return "Only the person who asked can decide this."
        by = user.username or user.full_name or str(user_id)
        chosen: Verdict = VERDICTS[verdict]  # type: ignore[assignment]
        await self.broker.decide(key, Decision(chosen, by, by_id=str(user_id)))
        return {"approve": "Approved.", "deny": "Denied.", "always": "Allowed here from now on."}[
            chosen
        ]

    async def _finish_orphan(self, record: RunRecord, trace: Trace, text: str) -> None:
        """The last edit of an answer whose process died: the message says so, its Stop
        button gone."""
        del trace  # stored by the caller; the message only says what happened
        try:
            chat, message_id = int(record.where["chat"]), int(record.where["message"])
        except (KeyError, ValueError):
            return
        surface = TelegramSurface(self.chat(chat), message_id)
        async with surface.chat.pacer.slot(surface.channel_key, priority="final"):
            await surface.edit(TelegramPayload(inert(text)))

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("a Telegram update failed", exc_info=context.error)

    async def say(self, asker: Asker, text: str) -> None:
        """A short message of the bot's own words (escaped), a reply to the asker's message
        in their topic; never raises."""
        chat = self.chat(asker.chat, asker.thread)
        try:
            await chat.send(TelegramPayload(inert(text)), reply_to=asker.message or None)
        except TelegramError:
            log.warning("could not send a message in chat %s", asker.chat, exc_info=True)


def _chat_name(update: Update) -> str:
    """A group's title, ``DM`` for a private chat; "" when Telegram gave neither."""
    chat = update.effective_chat
    if chat is None:
        return ""
    if chat.type == "private":
        return "DM"
    return chat.title or (f"@{chat.username}" if chat.username else "")


def _asker(update: Update) -> Asker | None:
    message, user = update.effective_message, update.effective_user
    if message is None or user is None:
        return None
    thread = message.message_thread_id if message.is_topic_message else None
    return Asker(message.chat.id, user.id, message.message_id, thread)
