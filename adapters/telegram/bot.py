"""Telegram on the shared pipeline: python-telegram-bot's ``Application`` polling for
updates, each question translated into an ``Ask``.

::

    getUpdates --(Application)--> a question: any text in a private chat; in a group a
                                  mention of the bot, a reply to one of its messages, /ask
      -> Ask (who: chat, topic and user; key telegram:<user>; place telegram:<chat>;
              conversation telegram:<chat>, or telegram:<chat>:<topic> in a forum topic)
      -> Answering.admit -> a Refusal (a reply saying so) or a Ticket
      -> Answering.answer(ticket, TelegramReply): a reply to the question, edited live
         (a document or photo on it read first, "typing…" meanwhile: adapters.telegram.files)
    a button press -> answerCallbackQuery, always, whatever it asked:
         Stop, Approve / Deny / Always allow (Dispatcher.stop / .decide: each checked
         against the run's own record, adapters.dispatch.handlers),
         Edit… / Deny with reason… (a ForceReply prompt, whose reply decides), Retry under
         an interrupted answer (its question asked again, only in its own chat)
    /reset -> the conversation's history and files forgotten
    /settings /verbosity /model /persona /tools /usage -> adapters.telegram.commands

This module writes no admission code: access (``telegram.allowed_chats``) is its one rule,
handed to ``Answering`` with the policy every surface shares.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from telegram import CallbackQuery, MessageEntity, Update, User
from telegram import Chat as TelegramChat
from telegram import Message as TelegramMessage
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

from adapters import words
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.dispatch.commands import Commands
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import (
    Actor,
    Ask,
    Command,
    Decide,
    Reset,
    Retry,
    ShowPersona,
    ShowTrace,
    Stop,
    Vote,
    Where,
)
from adapters.dispatch.outcome import Done, Drop, Outcome, Refusal, Said
from adapters.live import LiveMessage, RunView, Verbosity
from adapters.pacing import EditPacer
from adapters.policy import Policy
from adapters.room import Room
from adapters.telegram.asker import Asker, conversation_of
from adapters.telegram.commands import COMMANDS, PERSONA_USAGE, SettingsCommands
from adapters.telegram.files import HEARD, TelegramFiles, typing
from adapters.telegram.intents import actor_of, is_group, said_html, shared_command, where_of
from adapters.telegram.render import (
    DECIDE_PREFIX,
    PROMPTS,
    RETRY_PREFIX,
    STOP_PREFIX,
    VERDICTS,
    VOTE_PREFIX,
    Button,
    TelegramPayload,
    TelegramRenderer,
    cut,
    decision_prompt,
    inert,
    markdown_html,
    prompt_ref,
    retry_data,
    voted,
)
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.surface import Chat, TelegramSurface
from core.agent import Agent, Run
from core.approval import ApprovalBroker, ApprovalRequest
from core.budgets import TokenBudgets
from core.files import Incoming
from core.stores import RunRecord, Stores
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
UPDATES = ["message", "callback_query"]


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
    """``adapters.dispatch.handlers.ask.Reply`` of one question in a private chat."""

    def __init__(self, bot: TelegramBot, asker: Asker) -> None:
        self._bot = bot
        self._asker = asker
        self._chat = bot.chat(asker.chat, asker.thread)
        self._message_id: int | None = None

    async def open(self, verbosity: Verbosity) -> str | None:
        del verbosity
        return conversation_of(self._asker.chat, self._asker.thread)

    def reading(self) -> contextlib.AbstractAsyncContextManager[object]:
        """ "typing…" in the chat (its topic) while the question's files are read."""
        return typing(self._bot.application.bot, self._asker.chat, self._asker.thread)

    async def show(self, run: Run, view: RunView) -> LiveMessage[TelegramPayload] | None:
        renderer = TelegramRenderer(
            run.trace.id, clock=time.monotonic, trace_link=self._bot.trace_link
        )
        try:
            message_id = await self._chat.send(
                renderer.live(view), reply_to=self._asker.message or None
            )
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


def _in_place_of(request: ApprovalRequest, message: object) -> bool:
    """Whether ``message`` (the one a button was pressed under, or a prompt replied to) is
    in the chat, and the topic, of the run that asked for ``request``."""
    if not isinstance(message, TelegramMessage):
        return False
    thread = _thread_of(message)
    return request.conversation == conversation_of(message.chat.id, thread)


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
        policy: Policy,
        broker: ApprovalBroker | None = None,
        files: ConversationFiles | None = None,
        application: TelegramApp | None = None,
        trace_link: Callable[[str], str | None] | None = None,
        room: Room | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        """Who may ask where, admins, cooldown and the run's limits (``bot.policy``)."""
        self.trace_link = trace_link
        self.broker = broker
        """The trace page of a run (``web.*``), named in the caption of its documents."""
        self.stores = stores
        self.files = files
        self.pacer = EditPacer(EDIT_INTERVAL)
        self.group_pacer = EditPacer(GROUP_EDIT_INTERVAL, channel_window=GROUP_WRITES)
        self.application = application or telegram_application(settings)
        self.telegram_files = (
            TelegramFiles(self.application.bot, files.downloader) if files is not None else None
        )
        """Documents and photos on a question, read with getFile (``files.*``)."""
        self.answering: Answering[Asker] = Answering(
            agent,
            surface="telegram",
            policy=policy,
            stores=stores,
            budgets=budgets,
            choices=choices,
            files=files,
            broker=broker,
            empty_question="Send me a question as text (with a file or a photo: as its caption).",
            quote=lambda text: text,  # every text is escaped when it is sent
            finalise=self._finish_orphan,
            room=room,
        )
        self.dispatcher: Dispatcher[Asker] = Dispatcher(
            self.answering, claims=stores.claims, traces=stores.traces
        )
        """Each update once, bursts gathered, then the admission chain (``adapters.dispatch``)."""
        self.handlers = Commands(
            Services(policy, stores, budgets, choices, files), access=self.answering.access
        )
        """Reset, trace, votes, settings and usage, decided once (``adapters.dispatch``)."""
        self.commands = SettingsCommands(self, self.application.bot)
        """``/settings``, ``/verbosity``, ``/model``, ``/persona``, ``/tools``, ``/usage``."""
        self._add_handlers()

    def _add_handlers(self) -> None:
        private, groups = filters.ChatType.PRIVATE, filters.ChatType.GROUPS
        app = self.application
        app.add_handler(CommandHandler("start", self.on_start, filters=private))
        app.add_handler(CommandHandler("reset", self.on_reset))
        app.add_handler(CommandHandler("ask", self.on_ask))
        app.add_handler(CommandHandler("trace", self.on_trace))
        app.add_handler(CommandHandler(list(COMMANDS), self.on_setting))
        app.add_handler(CommandHandler("memory", self.on_memory))
        said = (filters.TEXT | filters.Document.ALL | filters.PHOTO | HEARD) & ~filters.COMMAND
        app.add_handler(MessageHandler(private & said, self.on_text))
        app.add_handler(MessageHandler(groups & said, self.on_group))
        app.add_handler(CallbackQueryHandler(self.on_button))
        app.add_error_handler(self.on_error)

    def chat(self, chat: int, thread: int | None = None) -> Chat:
        pacer = self.group_pacer if is_group(chat) else self.pacer
        speaker = self.files.hearing.speaker if self.files is not None else None
        return Chat(self.application.bot, chat, pacer, thread, speaker=speaker)

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
    async def refusal(self, asker: Asker) -> str | None:
        """Who may ask where (the shared rule), for a command that starts no run."""
        user = str(asker.user)
        actor = Actor("telegram", user, f"telegram:{user}", user, admin=self.policy.admin(user))
        return await self.answering.refusal(actor, where_of(asker.chat, asker.thread))

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """In a private chat every message is a question."""
        del context
        message = update.effective_message
        if message is not None and message.chat.type == ChatType.PRIVATE:
            if await self._prompt_reply(update):
                return
            await self._question(update, message.text or message.caption or "")

    async def on_group(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """In a group only a mention of the bot, or a reply to one of its messages."""
        message, me = update.effective_message, context.bot
        text = (message.text or message.caption or "") if message is not None else None
        if message is None or text is None or await self._prompt_reply(update):
            return
        replied = message.reply_to_message
        to_me = (
            replied is not None
            and replied.from_user is not None
            and (replied.from_user.id == me.id)
        )
        mention = f"@{me.username}".lower() if me.username else None
        kinds: list[str | None] = [MessageEntity.MENTION]
        named = (
            message.parse_entities(kinds) if message.text else message.parse_caption_entities(kinds)
        )
        mentioned = mention is not None and any(
            said.lower() == mention
            for entity, said in named.items()
            if entity.type == MessageEntity.MENTION
        )
        if not (to_me or mentioned):
            return
        question = text
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
        chat_name = _chat_name(update.effective_chat)
        ask = self._intent(
            asker,
            user,
            text,
            self._files_of(update),
            event=f"telegram:message:{asker.chat}:{asker.message}",
            chat_name=chat_name,
        )
        # In a task: a burst waits out agent.merge_window, and Telegram's updates are
        # handled one after another, so the next message of the burst must not wait for it.
        self.answering.spawn(self._asked(ask))

    async def _asked(self, ask: Ask[Asker]) -> None:
        await self._dispatch(ask)

    def _intent(
        self,
        asker: Asker,
        user: User,
        text: str,
        files: Sequence[Incoming] = (),
        *,
        event: str,
        chat_name: str = "",
        gathers: bool = True,
    ) -> Ask[Asker]:
        """The question as the dispatcher reads it: ``event`` is its claim (the message, a
        Retry press; the webhook route claims each delivery, ``telegram:update:{id}``, before
        this); ``/ask`` is a message like any other here (Telegram has no ack to keep), so it
        gathers too; Retry does not."""
        where = where_of(asker.chat, asker.thread, name=chat_name)
        actor = actor_of(user, admin=self.policy.admin(str(user.id)))
        question = text.strip()
        return Ask(event=event, actor=actor, where=where, question=question, files=files,
                   gathers=gathers, memories=asker.where, who=asker)  # fmt: skip

    def _actor(self, user: User) -> Actor:
        user_id = str(user.id)
        name = user.username or user.full_name or user_id
        return Actor("telegram", user_id, f"telegram:{user_id}", name,
                     admin=self.policy.admin(user_id))  # fmt: skip

    def _press_of(self, event: str, user: User, message: object) -> dict[str, Any]:
        """Who pressed, and the chat of the message they pressed under (Telegram's word,
        never the callback data's; no message: no place, refused), for a Stop or Decide."""
        chat = str(message.chat.id) if isinstance(message, TelegramMessage) else ""
        where = Where("telegram", "channel" if is_group(int(chat or 0)) else "dm", chat)
        return {"event": event, "actor": self._actor(user), "where": where, "at": {"chat": chat}}

    async def _dispatch(self, ask: Ask[Asker]) -> str | None:
        """The refusal's words (also sent as a reply), or None (answered, or nothing to say)."""
        outcome = await self.dispatcher.dispatch(
            ask, lambda admitted: TelegramReply(self, admitted.who)
        )
        if isinstance(outcome, Refusal):
            await self.say(ask.who, outcome.text)
            return outcome.text
        return None

    def _files_of(self, update: Update) -> list[Incoming]:
        message = update.effective_message
        if self.telegram_files is None or message is None:
            return []
        return self.telegram_files.incoming(message)

    async def on_start(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        del context
        if (asker := _asker(update)) is not None:
            await self.say(asker, GREETING)

    async def on_reset(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Forgets the conversation, the group's or the topic's (``adapters.dispatch``: in
        a group, for its admins)."""
        del context
        if (done := await self._command(Reset, update)) is not None:
            await self.say_html(done[0], said_html(done[1]))

    async def _command(
        self, kind: type[Command], update: Update, **given: Any
    ) -> tuple[Asker, Refusal | Drop | Said] | None:
        """A command as its intent, through the shared handlers (None: no one sent it)."""
        asker, user = _asker(update), update.effective_user
        if asker is None or user is None:
            return None
        intent = kind(
            event=f"telegram:command:{asker.chat}:{asker.message}",
            actor=actor_of(user, admin=await self.commands.is_admin(asker)),
            where=where_of(asker.chat, asker.thread, name=_chat_name(update.effective_chat)),
            **given,
        )
        return asker, await self.handlers.dispatch(intent)

    async def on_setting(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A settings command (``adapters.telegram.commands``); its reply in the chat."""
        del context
        message, asker = update.effective_message, _asker(update)
        if message is None or asker is None or not message.text:
            return
        head, _, argument = message.text.partition(" ")
        if "\n" in head:  # "/persona\nline one…": the text starts on the next line
            head, _, rest = head.partition("\n")
            argument = f"{rest} {argument}" if argument else rest
        command = head.removeprefix("/").partition("@")[0].lower()
        shared = shared_command(command, argument.strip())
        if shared is not None:  # every settings command but a /verbosity without a level
            if (done := await self._command(shared[0], update, **shared[1])) is not None:
                outcome = done[1]
                if isinstance(outcome, Said) and shared[1].get("change") == ShowPersona():
                    outcome = Said(f"{outcome.text} {PERSONA_USAGE}")
                await self.say_html(asker, said_html(outcome))
            return
        reply = await self.commands.run(command, asker)
        shown, _ = markdown_html(cut(reply, 3500))
        await self.say_html(asker, shown)

    async def on_memory(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """``/memory`` (``SettingsCommands.memory``)."""
        del context
        message, asker, user = update.effective_message, _asker(update), update.effective_user
        if message is not None and asker is not None and user is not None:
            argument = (message.text or "").partition(" ")[2]
            await self.commands.memory(asker, user.full_name, argument)

    async def on_trace(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The conversation's last trace, as its ``.md`` and ``.json`` documents."""
        del context
        if (done := await self._command(ShowTrace, update)) is None:
            return
        asker, shown = done
        if not isinstance(shown, Said) or shown.trace is None:
            await self.say_html(asker, said_html(shown))
            return
        found = shown.trace
        renderer = TelegramRenderer(found.id, clock=time.monotonic, trace_link=self.trace_link)
        chat = self.chat(asker.chat, asker.thread)
        try:
            for post in renderer.documents(found):
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
            words = await self._pressed(query)
        finally:
            try:
                await query.answer(words)
            except TelegramError:
                log.warning("could not answer the callback query %s", query.id, exc_info=True)

    async def _pressed(self, query: CallbackQuery) -> str | None:
        """Stop, pressed at whichever process Telegram reached: only its run id is read from
        the button (a client writes callback data); who may stop it, and from which chat,
        is the run's own record's word (``Dispatcher.stop``)."""
        data, user = query.data or "", query.from_user
        if data.startswith(DECIDE_PREFIX):
            return await self._decided(data, query)
        if data.startswith(RETRY_PREFIX):
            return await self._retry(data.removeprefix(RETRY_PREFIX), query)
        if data.startswith(VOTE_PREFIX):
            return await self._voted(data, query)
        if not data.startswith(STOP_PREFIX):
            return words.NOT_MINE
        run_id = data.removeprefix(STOP_PREFIX).partition(":")[0]
        stop = Stop(
            run_id=run_id, **self._press_of(f"telegram:press:{query.id}", user, query.message)
        )
        return _ack(await self.dispatcher.stop(stop))

    async def _decided(self, data: str, query: CallbackQuery) -> str:
        """Approve, Deny or Always allow, pressed under an action waiting for a person
        (``agent.approval.approvers`` decides who may; ``adapters.dispatch``); the broker
        reaches the run's process. Edit… and Deny with reason… ask for the words first: a
        ForceReply prompt, whose reply (at any process) decides."""
        try:
            verdict, run_id, step, call, _ = data.removeprefix(DECIDE_PREFIX).split(":")
            chosen = {**VERDICTS, **PROMPTS}[verdict]
            decide = Decide(run_id=run_id, step=int(step), call=int(call),
                            verdict=chosen,  # type: ignore[arg-type]  # one of VERDICTS
                            **self._press_of(f"telegram:press:{query.id}", query.from_user,
                                            query.message))  # fmt: skip
        except (ValueError, KeyError):
            return words.NOT_MINE
        request = await self.dispatcher.waiting(decide)
        if isinstance(request, Refusal):
            return request.text
        if not _in_place_of(request, query.message):  # its topic too
            return words.NOT_ITS_PLACE
        if verdict in PROMPTS:
            return await self._prompt(verdict, query, request, ref=data.removeprefix(
                f"{DECIDE_PREFIX}{verdict}:"))  # fmt: skip
        return _ack(await self.dispatcher.decide(decide))

    async def _prompt(
        self, kind: str, query: CallbackQuery, request: ApprovalRequest, *, ref: str
    ) -> str:
        """The ForceReply under the live message that asks for the new input or the reason."""
        message = query.message
        if not isinstance(message, TelegramMessage):
            return words.MESSAGE_TOO_OLD
        thread = _thread_of(message)
        payload = decision_prompt(
            kind, tool=request.name, current=request.input, ref=ref,
            mention=query.from_user.username if is_group(message.chat.id) else None,
        )  # fmt: skip
        try:
            await self.chat(message.chat.id, thread).send(payload, reply_to=message.message_id)
        except TelegramError:
            log.warning("could not ask for a decision in chat %s", message.chat.id, exc_info=True)
            return words.PROMPT_FAILED
        return words.EDIT_BY_REPLY if kind == "e" else words.REASON_BY_REPLY

    async def _prompt_reply(self, update: Update) -> bool:
        """A reply to one of the bot's Edit… or Deny with reason… prompts: the edited input
        or the reason decides the pending action it names. False for any other message."""
        message, user = update.effective_message, update.effective_user
        replied = message.reply_to_message if message is not None else None
        me = self.application.bot
        if message is None or user is None or replied is None or replied.from_user is None:
            return False
        if replied.from_user.id != me.id or (found := prompt_ref(replied.text or "")) is None:
            return False
        asker = _asker(update)
        assert asker is not None  # a message with its sender
        kind, run_id, step, call, _ = found.groups()
        text = message.text or message.caption or ""
        edit = kind == "e"
        decide = Decide(run_id=run_id, step=int(step), call=int(call),
                        verdict="edit" if edit else "deny", input=text if edit else None,
                        reason="" if edit else text, written=True,
                        **self._press_of(f"telegram:message:{message.chat.id}:{message.message_id}",
                                        user, replied))  # fmt: skip
        request = await self.dispatcher.waiting(decide)
        if isinstance(request, Refusal):
            said = request.text
        elif not _in_place_of(request, replied):
            # The reference is read from the replied-to message's text, which may end with
            # words a model wrote: it decides only an action of this chat, for its asker.
            said = words.NOT_ITS_PLACE
        else:
            said = _ack(await self.dispatcher.decide(decide))
        await self.say(asker, said)
        return True

    async def _finish_orphan(self, record: RunRecord, trace: Trace, text: str) -> None:
        """The last edit of an answer whose process died: the message says so, its Stop
        button replaced by Retry (when the question is known: it is asked again)."""
        try:
            chat, message_id = int(record.where["chat"]), int(record.where["message"])
        except (KeyError, ValueError):
            return
        surface = TelegramSurface(self.chat(chat), message_id)
        retry = (
            (Button(str(words.BUTTONS["retry"]), retry_data(record.run_id)),)
            if trace.question
            else ()
        )
        async with surface.chat.pacer.slot(surface.channel_key, priority="final"):
            await surface.edit(TelegramPayload(inert(text), retry))

    async def _retry(self, run_id: str, query: CallbackQuery) -> str:
        """Retry under an interrupted answer: its question asked again, by whoever pressed,
        as a reply to that message (``Dispatcher.retry``: once per run); a refusal is the
        press's answer, as a Stop's."""
        message = query.message
        if not isinstance(message, TelegramMessage):
            return words.MESSAGE_TOO_OLD
        thread = _thread_of(message)
        asker = Asker(message.chat.id, query.from_user.id, message.message_id, thread)
        press = f"telegram:retry:{query.id}"
        ask = self._intent(asker, query.from_user, "", event=press,
                           chat_name=_chat_name(message.chat), gathers=False)  # fmt: skip
        retry = Retry(run_id=run_id, places=(conversation_of(message.chat.id, thread),),
                      event=press, actor=ask.actor, where=ask.where)  # fmt: skip
        outcome = await self.dispatcher.retry(
            retry,
            lambda question: replace(ask, question=question.strip()),
            lambda admitted: TelegramReply(self, admitted.who),
        )
        if isinstance(outcome, Done):
            return words.ASKING_AGAIN
        return cut(outcome.text, 190) if isinstance(outcome, Refusal) else ""

    async def _voted(self, data: str, query: CallbackQuery) -> str | None:
        """👍 / 👎 under an answer: the shared handler's words, as the press's answer."""
        message, parsed = query.message, voted(data)
        if not isinstance(message, TelegramMessage) or parsed is None:
            return words.NOT_MINE
        asker = Asker(message.chat.id, query.from_user.id, message.message_id, _thread_of(message))
        intent = Vote(
            event=f"telegram:vote:{query.id}",
            # a vote needs no admin: the listed ones, without asking Telegram for the group's
            actor=actor_of(query.from_user, admin=self.policy.admin(str(asker.user))),
            where=where_of(asker.chat, asker.thread),
            run_id=parsed[1],
            value="up" if parsed[0] == "up" else "down",
        )
        outcome = await self.handlers.dispatch(intent)
        return cut(outcome.text, 190) if not isinstance(outcome, Drop) else None

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("a Telegram update failed", exc_info=context.error)

    async def say(self, asker: Asker, text: str) -> None:
        """A short message of the bot's own words (escaped), a reply to the asker's message
        in their topic; never raises."""
        await self.say_html(asker, inert(text))

    async def say_html(self, asker: Asker, html: str) -> None:
        """``say``, of HTML this module drew (every outside text in it escaped)."""
        chat = self.chat(asker.chat, asker.thread)
        try:
            await chat.send(TelegramPayload(html), reply_to=asker.message or None)
        except TelegramError:
            log.warning("could not send a message in chat %s", asker.chat, exc_info=True)


def _chat_name(chat: TelegramChat | None) -> str:
    """A group's title, ``DM`` for a private chat; "" when Telegram gave neither."""
    if chat is None:
        return ""
    if chat.type == "private":
        return "DM"
    return chat.title or (f"@{chat.username}" if chat.username else "")


def _thread_of(message: TelegramMessage) -> int | None:
    """The forum topic ``message`` is in, if any (a reply chain's thread id is not one)."""
    return message.message_thread_id if message.is_topic_message else None


def _asker(update: Update) -> Asker | None:
    message, user = update.effective_message, update.effective_user
    if message is None or user is None:
        return None
    thread = _thread_of(message)
    return Asker(message.chat.id, user.id, message.message_id, thread)


def _ack(outcome: Outcome) -> str:
    """A press's callback answer: the refusal's words, or the ack's."""
    if isinstance(outcome, Refusal):
        return outcome.text
    return (outcome.ack or "") if isinstance(outcome, Done) else ""
