"""The Cog: Discord's events, translated. Mentions and DMs go through the dispatcher
(``adapters.dispatch``: each event once, bursts, admission); ``/reset``, ``/trace``, votes
and ``/reactbot settings|verbosity|usage`` are intents for the shared handlers
(``shared_commands``), ``/reactbot memory`` and ``/reactbot schedule`` too
(``memory_command``, ``schedule_command``); Stop, the decisions and Retry (once per run) are
presses the dispatcher decides against the run's own record (``adapters.dispatch.handlers``);
``/reactbot model|tools|prompt`` are ``Settings`` intents too (the persona's form is
Discord's, its text ``SetPersona``); ``/ask`` is still handled here (docs/plans/
dispatcher.md). The buttons and forms are ``adapters.discord.buttons`` (each hands its press
back here); a DM's guild memberships are looked up by ``adapters.discord.memberships``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.ext import commands

from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.context import Read
from adapters.decisions import may_retry
from adapters.discord.access import Asker, is_admin
from adapters.discord.buttons import (
    DecisionButton,
    DecisionModal,
    PersonaModal,
    Pressed,
    RetryButton,
    SourcesButton,
    StopButton,
    VoteButton,
    card_view,
    controls,
    votes_view,
)
from adapters.discord.files import incoming_of
from adapters.discord.history import read_before
from adapters.discord.layout import (
    ComponentsRenderer,
    card_placeholder,
    sources_list,
)
from adapters.discord.memberships import DmMemberships
from adapters.discord.payload import DiscordPayload, FileSpec, PendingButtons
from adapters.discord.render import DiscordRenderer, fit, page_link_line, placeholder, sanitize
from adapters.discord.schedule_command import REACTBOT, ReactbotCommands
from adapters.discord.settings import DiscordSettings
from adapters.discord.shared_commands import SharedCommands, shown
from adapters.discord.surface import (
    NO_MENTIONS,
    CardBuilder,
    CardView,
    DiscordSurface,
    RateLimitWatch,
    suppress_embeds,
    to_files,
)
from adapters.discord.translate import (
    asker_of,
    is_bots_thread,
    memory_place,
    question_from,
    where_of,
    why_question,
)
from adapters.dispatch.checks import Admitted
from adapters.dispatch.commands import Commands
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.handlers.services import Services as Shared
from adapters.dispatch.intents import (
    Actor,
    Decide,
    EditPersona,
    Retry,
    SetModel,
    SetPersona,
    Settings,
    ShowTools,
    Stop,
    ToggleTool,
    Where,
)
from adapters.dispatch.intents import Ask as Intent
from adapters.dispatch.outcome import Drop, Outcome, Refusal, Said
from adapters.live import LiveMessage, RunView, Verbosity
from adapters.pacing import DISCORD_CHANNEL_WRITES, EditPacer
from adapters.policy import Policy
from adapters.room import Room
from core.agent import Agent, Run
from core.approval import ApprovalBroker
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.errors import StoreUnavailable
from core.stores import RunRecord, Stores
from core.trace import Trace, steps_made

if TYPE_CHECKING:  # discord.py defines its channel unions for type checkers only
    from adapters.discord.translate import Channel

log = logging.getLogger(__name__)

Live = LiveMessage[DiscordPayload]
QUIET: dict[str, Any] = {"allowed_mentions": NO_MENTIONS, "suppress_embeds": True}


@dataclass(slots=True)
class Services:
    """What the adapter is given by the application (it opens no stores of its own)."""

    agent: Agent
    stores: Stores
    """Every store, shared with the other shards/processes when Redis is configured."""
    settings: DiscordSettings
    policy: Policy
    on_live: Callable[[Live], None] | None = None
    """Called with each new LiveMessage (benchmarks and tests read its stats)."""
    broker: ApprovalBroker | None = None
    """Carries a decision on a pending action to its run (the agent's approver)."""
    trace_link: Callable[[str], str | None] | None = None
    """The signed page of a trace, posted last in its thread (None: no links)."""
    budgets: TokenBudgets = field(default_factory=lambda: TokenBudgets(InMemoryUsageCounters()))
    """Daily token limits per user and channel (``budgets.*``); unlimited by default."""
    files: ConversationFiles | None = None
    """Attached files as knowledge for the conversation (``files.*``); None: ignored."""
    choices: ChannelChoices | None = None
    """Each channel's model, persona and tools (``/reactbot model|prompt|tools``); None: the
    agent's defaults everywhere, over ``stores.channel_settings``."""
    room: Room | None = None
    """The process's room for runs, shared with its other surfaces (``adapters.room``)."""

    def __post_init__(self) -> None:
        if self.choices is None:
            self.choices = ChannelChoices(self.stores.channel_settings, tools=self.agent.tools)


def thread_trace_post(trace: Trace, link: str | None) -> DiscordPayload:
    """An answer's trace in a thread the bot opened: one post with the trace as files and
    the page link, not a post per step (the thread is where people talk to the bot)."""
    files = [
        FileSpec(f"trace-{trace.id}.md", trace.to_markdown().encode()),
        FileSpec(f"trace-{trace.id}.json", trace.to_json(indent=2).encode()),
    ]
    steps = steps_made(trace)
    line = (
        f"-# 🧾 Trace: {steps} step{'s' if steps != 1 else ''} · {trace.seconds:.1f} s · attached"
    )
    if link is not None:
        line += "\n" + page_link_line(link)
    return DiscordPayload(line, tuple(files))


def _user_key(asker: Asker) -> str:
    return f"discord:{asker.user_id}"


# ---- the cog ------------------------------------------------------------------------------


class AskCog(SharedCommands, ReactbotCommands, commands.Cog):
    def __init__(
        self,
        bot: commands.Bot | commands.AutoShardedBot,
        services: Services,
        *,
        watch: RateLimitWatch,
    ) -> None:
        self.bot = bot
        self.services = services
        self.settings = services.settings
        self.policy = services.policy
        self.watch = watch
        self.pacer = EditPacer(self.settings.edit_interval, channel_window=DISCORD_CHANNEL_WRITES)
        self.renderer: DiscordRenderer | ComponentsRenderer = (
            ComponentsRenderer(trace_link=services.trace_link)
            if services.settings.layout == "components"
            else DiscordRenderer(trace_link=services.trace_link)
        )
        self.answering: Answering[Asker] = Answering(
            services.agent,
            surface="Discord",
            policy=services.policy,
            stores=services.stores,
            budgets=services.budgets,
            choices=self._choices,
            files=services.files,
            broker=services.broker,
            empty_question="Ask me something after the mention.",
            quote=lambda text: fit(sanitize(text), 2000),
            finalise=self._finish_orphan,
            room=services.room,
            members=DmMemberships(bot),  # a DM's guild memberships, for the shared access rule
        )
        self.dispatcher: Dispatcher[Asker] = Dispatcher(
            self.answering, claims=services.stores.claims, traces=services.stores.traces
        )
        self.handlers = Commands(
            Shared(
                services.policy, services.stores, services.budgets, self._choices, services.files
            ),
            access=self.answering.access,
        )
        """``/reset``, ``/trace``, votes, settings and usage (``shared_commands``)."""

    async def cog_load(self) -> None:
        # Registered for the whole bot: clicks on messages another process posted land here.
        self.bot.add_dynamic_items(
            StopButton, DecisionButton, SourcesButton, VoteButton, RetryButton
        )
        await self.answering.start()  # stops and decisions made on other processes reach us

    async def cog_unload(self) -> None:
        self.bot.remove_dynamic_items(
            StopButton, DecisionButton, SourcesButton, VoteButton, RetryButton
        )
        await self.answering.aclose(grace=0)

    # ---- mentions and DMs -----------------------------------------------------------------
    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        me = self.bot.user
        if me is None or message.author.bot or message.webhook_id is not None:
            return
        why = why_question(message, me.id, self.settings)
        if why is None:
            return
        asker = asker_of(message.author)
        files = self.services.files
        ask: Intent[Asker] = Intent(
            event=f"discord:message:{message.id}",
            actor=self._actor(message.author, asker),
            where=where_of(message.channel, message.channel.id, bot_id=me.id),
            question=question_from(message.content, me.id),
            files=incoming_of(message.attachments, files.downloader) if files is not None else (),
            earlier=self._earlier(message, me) if why == "mention" else None,
            memories=asker.where(*memory_place(message.channel, message.channel.id)),
            who=asker,
        )
        outcome = await self.dispatcher.dispatch(ask, lambda ask: MentionReply(self, message, ask))
        if isinstance(outcome, Refusal):
            async with self.pacer.slot(str(message.channel.id), priority="first"):
                await message.reply(
                    outcome.text, mention_author=False, allowed_mentions=NO_MENTIONS
                )

    # ---- app commands ---------------------------------------------------------------------
    @app_commands.command(name="ask", description="Ask a question; watch the reasoning live.")
    @app_commands.describe(
        question="What do you want to know?",
        model="A model from the catalogue for this question only (default: this channel's)",
        file="A file to read as knowledge (optional)",
    )
    async def ask(
        self,
        interaction: discord.Interaction,
        question: str,
        model: str | None = None,
        file: discord.Attachment | None = None,
    ) -> None:
        await self._answer_interaction(interaction, question, model=model, file=file)

    async def _answer_interaction(
        self,
        interaction: discord.Interaction,
        question: str,
        *,
        model: str | None = None,
        file: discord.Attachment | None = None,
    ) -> None:
        """``/ask``: through ``Dispatcher.dispatch`` like a mention, without gathering (the
        3-second rule: deferred once admitted, a refusal said privately), answered in the
        interaction's own response."""
        ask = self._slash_ask(interaction, question.strip(), model=model, file=file)
        outcome = await self.dispatcher.dispatch(
            ask,
            self._interaction_reply(interaction),
            admitted=self._defer_once_admitted(interaction),
        )
        await _refused(interaction, outcome)

    def _slash_ask(
        self,
        interaction: discord.Interaction,
        question: str,
        *,
        model: str | None = None,
        file: discord.Attachment | None = None,
    ) -> Intent[Asker]:
        """An interaction's question (``/ask``, a Retry's) as the dispatcher reads it."""
        channel, channel_id, user = (
            interaction.channel,
            interaction.channel_id or 0,
            interaction.user,
        )
        me, asker = self.bot.user, asker_of(user)
        files = self.services.files
        return Intent(
            event=f"discord:interaction:{interaction.id}",
            actor=self._actor(user, asker),
            where=where_of(channel, channel_id, bot_id=me.id if me else 0),
            question=question,
            model=model,
            files=incoming_of([file], files.downloader) if file and files is not None else (),
            gathers=False,
            memories=asker.where(*memory_place(channel, channel_id)),
            who=asker,
        )

    def _interaction_reply(
        self, interaction: discord.Interaction
    ) -> Callable[[Admitted[Asker]], InteractionReply]:
        return lambda admitted: InteractionReply(self, interaction, admitted)

    @staticmethod
    def _defer_once_admitted(interaction: discord.Interaction) -> Callable[[], Awaitable[None]]:
        async def defer() -> None:  # the 3-second rule: the ack, before the run starts
            await interaction.response.defer(thinking=True)

        return defer

    @ask.autocomplete("model")
    async def _model_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=n, value=n) for n in self._choices.matching(current)]

    @property
    def _choices(self) -> ChannelChoices:
        assert self.services.choices is not None  # set in Services.__post_init__
        return self.services.choices

    def _trace_post(self, interaction: discord.Interaction, said: Said) -> dict[str, Any]:
        """``/trace``'s post of the trace ``said`` names: its card, or its text and files."""
        assert said.trace is not None
        reply = self.renderer.trace_reply(said.trace)
        if reply.card is not None:  # a card names its files; it carries no content
            view = card_view(said.trace.id, interaction.user.id, reply)
            return {"view": view, "files": to_files(reply.files), **QUIET}
        return {"content": reply.content, "files": to_files(reply.files), **QUIET}

    reactbot = REACTBOT  # with memory and schedule subcommands (``ReactbotCommands``)

    @reactbot.command(name="model", description="The model this channel uses.")
    @app_commands.describe(name="A model from the catalogue, or 'default'")
    async def set_model(self, interaction: discord.Interaction, name: str) -> None:
        await self._answer(interaction, Settings, change=SetModel(name))

    @set_model.autocomplete("name")
    async def _catalogue_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        names = [*self._choices.matching(current), "default"][:25]
        return [app_commands.Choice(name=n, value=n) for n in names]

    @reactbot.command(name="tools", description="Turn a tool on or off in this channel.")
    @app_commands.describe(tool="The tool to turn on or off (leave out to list them)")
    async def toggle_tool(self, interaction: discord.Interaction, tool: str | None = None) -> None:
        change = ShowTools() if tool is None else ToggleTool(tool)
        await self._answer(interaction, Settings, change=change)

    @toggle_tool.autocomplete("tool")
    async def _tool_names(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        names = self._choices.matching_tools(current)
        return [app_commands.Choice(name=n, value=n) for n in names]

    @reactbot.command(name="prompt", description="This channel's persona (opens a form).")
    async def set_prompt(self, interaction: discord.Interaction) -> None:
        """The persona's form, for an admin (``EditPersona``), with the persona as it is."""
        outcome = await self._dispatch(interaction, Settings, change=EditPersona())
        if isinstance(outcome, Said) and outcome.form is not None:
            await interaction.response.send_modal(PersonaModal(self, outcome.form))
        elif not isinstance(outcome, Drop):
            await interaction.response.send_message(
                shown(outcome), ephemeral=True, allowed_mentions=NO_MENTIONS
            )

    async def persona_submitted(self, interaction: discord.Interaction, text: str) -> None:
        await self._answer(interaction, Settings, change=SetPersona(text))

    # ---- shared steps ---------------------------------------------------------------------
    async def _admit(self, interaction: discord.Interaction) -> Asker | None:
        """A command that starts no run: claim the interaction and check access alone;
        a refusal is answered privately."""
        if not await self.services.stores.claims.claim(f"discord:interaction:{interaction.id}"):
            return None
        channel, channel_id, me = interaction.channel, interaction.channel_id or 0, self.bot.user
        asker = asker_of(interaction.user)
        problem = await self.answering.refusal(
            self._actor(interaction.user, asker),
            where_of(channel, channel_id, bot_id=me.id if me else 0),
        )
        if problem:
            await interaction.response.send_message(problem, ephemeral=True)
            return None
        return asker

    def _earlier(
        self, message: discord.Message, me: discord.abc.User
    ) -> Callable[[], Awaitable[Read]]:
        """A mention's reading of its channel or thread (``context.*``)."""
        limit = self.policy.context.messages

        async def read() -> Read:
            return await read_before(message, limit=limit, me=me)

        return read

    def _actor(self, user: discord.User | discord.Member, asker: Asker) -> Actor:
        admin = is_admin(self.policy, asker)
        roles = frozenset(str(role) for role in asker.role_ids)
        return Actor(
            "discord", str(user.id), _user_key(asker), user.display_name, admin=admin, roles=roles
        )

    def _conversation_of(self, interaction: discord.Interaction) -> str:
        return self._conversation_at(interaction.channel, interaction.channel_id or 0)

    def _conversation_at(self, channel: Channel, channel_id: int) -> str:
        """One rule for a message, a command and a button here (``adapters.dispatch``)."""
        me = self.bot.user
        return self.dispatcher.conversation(
            where_of(channel, channel_id, bot_id=me.id if me else 0)
        )

    # ---- stopping ------------------------------------------------------------------------
    async def stop_pressed(self, interaction: discord.Interaction, run_id: str) -> None:
        """Checked against the run's own record wherever it runs (``Dispatcher.stop``); the
        asker in the custom id is not believed."""
        stop = Stop(run_id=run_id, **self._press(interaction))
        await _said(interaction, await self.dispatcher.stop(stop, named=_mention))

    # ---- the components layout -----------------------------------------------------------
    def _first(
        self, run: Run, asker: Asker, question: str
    ) -> tuple[DiscordPayload, discord.ui.View | discord.ui.LayoutView]:
        """The placeholder and its view: a card with Stop, or content and a Stop button."""
        if self.settings.layout == "components":
            first = card_placeholder()
            return first, card_view(run.trace.id, asker.user_id, first)
        return placeholder(question), controls(run.trace.id, asker.user_id, None)

    @staticmethod
    def _cards(run: Run, asker: Asker) -> CardBuilder:
        def build(payload: DiscordPayload, sets_flag: bool) -> CardView:
            return card_view(run.trace.id, asker.user_id, payload, sets_flag=sets_flag)

        return build

    async def _finish_orphan(self, record: RunRecord, trace: Trace, text: str) -> None:
        """The last edit of an answer whose process died: the message says so, its buttons
        gone (a card stays a card)."""
        try:
            channel_id, message_id = int(record.where["channel"]), int(record.where["message"])
        except (KeyError, ValueError):
            return
        message = self.bot.get_partial_messageable(channel_id).get_partial_message(message_id)
        payload = self.renderer.plain(text)
        retry = [RetryButton(record.run_id)] if trace.question else []
        async with self.pacer.slot(str(channel_id), priority="final"):
            if payload.card is None:
                view = discord.ui.View(timeout=None)
                for button in retry:
                    view.add_item(button)
                await message.edit(content=payload.content, view=view, allowed_mentions=NO_MENTIONS)
            else:
                card = card_view(record.run_id, 0, payload, extra=retry)
                await message.edit(view=card, allowed_mentions=NO_MENTIONS)

    async def retry_pressed(self, interaction: discord.Interaction, run_id: str) -> None:
        """Retry on an interrupted answer: its question asked again by whoever pressed, in
        the channel (or thread) it was asked in (``Dispatcher.retry``: once per run)."""
        press = self._press(interaction)
        del press["at"]  # Retry reads the trace's conversation, not a run's record
        retry = Retry(run_id=run_id, places=_places(interaction), **press)
        ask = self._slash_ask(interaction, "")
        outcome = await self.dispatcher.retry(
            retry,
            lambda question: replace(ask, question=question),
            self._interaction_reply(interaction),
            admitted=self._defer_once_admitted(interaction),
        )
        await _refused(interaction, outcome)

    async def sources_pressed(self, interaction: discord.Interaction, run_id: str) -> None:
        """Anyone may ask; the answer is private, the links written out, nobody pinged."""
        trace = await self._trace_pressed(interaction, run_id)
        text = (
            sources_list(trace.cited)
            if trace is not None
            else "I no longer have this run's sources; `/trace` shows the last run here."
        )
        await interaction.response.send_message(
            text, ephemeral=True, allowed_mentions=NO_MENTIONS, suppress_embeds=True
        )

    @staticmethod
    def _from_its_place(interaction: discord.Interaction, trace: Trace) -> bool:
        """Whether a press on ``trace``'s buttons came from its own conversation (the channel,
        or the thread's parent): a run id is read by everyone who saw the message, and a
        custom id naming it pressed elsewhere must not read out another conversation."""
        return may_retry(trace.conversation, _places(interaction))

    async def _trace_pressed(self, interaction: discord.Interaction, run_id: str) -> Trace | None:
        """The trace a button names, if it is stored and the press came from its place."""
        try:
            trace = await self.services.stores.traces.get(run_id)
        except StoreUnavailable:
            return None
        return trace if trace is not None and self._from_its_place(interaction, trace) else None

    # ---- approvals -----------------------------------------------------------------------
    @staticmethod
    def _controls(run: Run, asker: Asker) -> Callable[[PendingButtons | None], discord.ui.View]:
        def build(pending: PendingButtons | None) -> discord.ui.View:
            return controls(run.trace.id, asker.user_id, pending)

        return build

    async def decision_pressed(self, interaction: discord.Interaction, pressed: Pressed) -> None:
        """Against the run's own record (``Dispatcher``); Edit… and Deny open a form first."""
        decide = Decide(**self._decision(interaction, pressed, pressed.verdict))
        if pressed.verdict in ("approve", "always"):
            await _said(interaction, await self.dispatcher.decide(decide, named=_mention))
            return
        request = await self.dispatcher.waiting(decide, named=_mention)
        if isinstance(request, Refusal):
            await _said(interaction, request)
            return
        await interaction.response.send_modal(DecisionModal(self, pressed, request))

    async def modal_submitted(self, interaction: discord.Interaction, modal: DecisionModal) -> None:
        edited = modal.edited.value if modal.edited is not None else None
        verdict = "deny" if edited is None else "edit"
        decide = Decide(**self._decision(interaction, modal.pressed, verdict), input=edited,
                        reason=modal.reason.value or "", written=True)  # fmt: skip
        await _said(interaction, await self.dispatcher.decide(decide, named=_mention))

    def _decision(self, interaction: discord.Interaction, pressed: Pressed, verdict: str) -> Any:
        return {"step": pressed.step, "call": pressed.call, "verdict": verdict,
                "run_id": pressed.run_id, **self._press(interaction)}  # fmt: skip

    def _press(self, interaction: discord.Interaction) -> dict[str, Any]:
        """Who clicked, and the channel of the message clicked (Discord's word, not ours)."""
        channel = str(interaction.channel_id) if interaction.channel_id else ""
        who = interaction.user
        asker = asker_of(who)
        return {"event": f"discord:interaction:{interaction.id}", "at": {"channel": channel},
                "actor": self._actor(who, asker), "where": Where("discord", "channel", channel)}  # fmt: skip

    def _live(self, run: Run, message: discord.Message, view: RunView, reply: _Reply) -> Live:
        """The follower of ``run`` into its posted placeholder ``message``."""
        surface = DiscordSurface(
            message,
            watch=self.watch,
            pacer=self.pacer,
            channel_key=str(reply.channel_id),
            controls=self._controls(run, reply.ask.who),
            votes=lambda: votes_view(run.trace.id),
            cards=self._cards(run, reply.ask.who),
            compact_trace=self._thread_trace(message),
        )
        live: Live = LiveMessage(
            surface, self.renderer, self.pacer, view=view, tick=self.settings.tick
        )
        if self.services.on_live is not None:
            self.services.on_live(live)
        return live

    def _thread_trace(self, message: discord.Message) -> Callable[[Trace], DiscordPayload] | None:
        """In a thread the bot opened, the trace goes as one post (files and page link)."""
        me = self.bot.user
        if me is None or not is_bots_thread(message.channel, me.id):
            return None
        link = self.services.trace_link

        def post(trace: Trace) -> DiscordPayload:
            return thread_trace_post(trace, link(trace.id) if link is not None else None)

        return post

    async def _say(self, channel_id: int, send: Coroutine[Any, Any, object]) -> None:
        """One short extra message (the refused files); a failure is logged, not raised."""
        try:
            async with self.pacer.slot(str(channel_id), priority="first"):
                await send
        except discord.HTTPException:
            log.warning("could not say which files were refused in channel %s", channel_id)

    @property
    def running(self) -> tuple[str, ...]:
        """The ids of the runs this process is answering now."""
        return self.answering.running

    async def settled(self) -> None:
        """Return once every task this cog spawned (runs, their threads and counts) is done."""
        await self.answering.settled()

    async def shutdown(self, *, grace: float = 5.0) -> None:
        """Stop every run and let its message reach a final state before the session closes."""
        await self.answering.aclose(grace=grace)


class _Reply:
    """What both kinds of Discord answer share: the channel, and the placeholder's view,
    stopped when the run ends."""

    def __init__(self, cog: AskCog, ask: Admitted[Asker], channel_id: int) -> None:
        self.cog, self.ask, self.channel_id = cog, ask, channel_id
        self._view: discord.ui.View | discord.ui.LayoutView | None = None
        self._message_id: int | None = None

    def where(self) -> dict[str, str]:
        if self._message_id is None:
            return {}
        return {"channel": str(self.channel_id), "message": str(self._message_id)}

    def _shown(
        self,
        run: Run,
        message: discord.Message,
        view: RunView,
        controls: discord.ui.View | discord.ui.LayoutView,
    ) -> Live:
        """The placeholder ``message`` is posted with ``controls``: follow ``run`` into it."""
        self._view = controls
        self._message_id = message.id
        return self.cog._live(run, message, view, self)

    async def ended(self, run: Run) -> None:
        if self._view is not None:
            self._view.stop()


class MentionReply(_Reply):
    """An answer to a mention or DM: a reply to the message, "typing…" while its files are
    read (no reply is posted yet), the refused files said in a reply too."""

    def __init__(self, cog: AskCog, message: discord.Message, ask: Admitted[Asker]) -> None:
        super().__init__(cog, ask, message.channel.id)
        self.message = message

    async def open(self, verbosity: Verbosity) -> str | None:
        return self.cog._conversation_at(self.message.channel, self.message.channel.id)

    def reading(self) -> AbstractAsyncContextManager[object]:
        return _typing(self.message.channel)

    async def show(self, run: Run, view: RunView) -> Live | None:
        first, controls = self.cog._first(run, self.ask.who, view.question)
        try:
            # a write in the channel's bucket like the edits: it leaves the finals their write
            async with self.cog.pacer.slot(str(self.channel_id), priority="first"):
                message = await self._post(first, controls)
        except discord.HTTPException:
            log.exception("could not post the placeholder in channel %s", self.channel_id)
            return None
        return self._shown(run, message, view, controls)

    async def _post(
        self, first: DiscordPayload, controls: discord.ui.View | discord.ui.LayoutView
    ) -> discord.Message:
        quiet: dict[str, Any] = {"mention_author": False, **QUIET}  # URLs shown, not previewed
        if isinstance(controls, discord.ui.LayoutView):  # a card carries no content
            return await self.message.reply(view=controls, **quiet)
        return await self.message.reply(first.content, view=controls, **quiet)

    async def note(self, text: str) -> None:
        await self.cog._say(self.channel_id, self.message.reply(text, **QUIET))


class InteractionReply(_Reply):
    """An answer to ``/ask``: the deferred response (Discord's own "thinking…") becomes the
    live message, with Stop, before the files are read; refused files are said after it."""

    def __init__(self, cog: AskCog, interaction: discord.Interaction, ask: Admitted[Asker]) -> None:
        super().__init__(cog, ask, interaction.channel_id or 0)
        self.interaction = interaction

    async def open(self, verbosity: Verbosity) -> str | None:
        return self.cog._conversation_of(self.interaction)

    def reading(self) -> AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def show(self, run: Run, view: RunView) -> Live | None:
        first, controls = self.cog._first(run, self.ask.who, view.question)
        interaction = self.interaction
        try:
            # A deferred response becomes a card through this edit, not the callback (the
            # only flag a deferral may carry is EPHEMERAL).
            if not isinstance(controls, discord.ui.LayoutView):
                message = await interaction.edit_original_response(
                    content=first.content, view=controls, allowed_mentions=NO_MENTIONS
                )
            else:
                message = await interaction.edit_original_response(
                    view=controls, allowed_mentions=NO_MENTIONS
                )
            if not message.flags.suppress_embeds:  # a bot-token write in the channel's bucket
                async with self.cog.pacer.slot(str(self.channel_id), priority="first"):
                    await suppress_embeds(message)
        except discord.HTTPException:
            log.exception("could not post the placeholder for interaction %s", interaction.id)
            return None
        return self._shown(run, message, view, controls)

    async def note(self, text: str) -> None:
        await self.cog._say(self.channel_id, self.interaction.followup.send(text, **QUIET))


@contextlib.asynccontextmanager
async def _typing(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Discord's typing indicator in ``channel`` while the block runs (discord.py renews it
    every 5 s); best effort: a refused trigger is logged and the work goes on."""
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(channel.typing())
        except discord.HTTPException as exc:
            where = getattr(channel, "id", "?")
            log.warning("could not show typing in channel %s: %s", where, exc)
        yield


def _places(interaction: discord.Interaction) -> set[str]:
    """The conversations a press may act on: its channel's, or its thread's parent's."""
    channel, parent = interaction.channel_id, getattr(interaction.channel, "parent_id", None)
    return {f"discord:{place}" for place in (channel, parent) if place}


def _mention(user: str) -> str | None:
    """A person in a refusal: a mention (sent with no pings)."""
    return f"<@{user}>" if user.isdigit() else None


async def _refused(interaction: discord.Interaction, outcome: Outcome) -> None:
    """An ask's refusal, said only to the asker (an admitted one was deferred: its answer
    follows; a redelivery is the first delivery's to answer)."""
    if isinstance(outcome, Refusal):
        await interaction.response.send_message(
            outcome.text, ephemeral=True, allowed_mentions=NO_MENTIONS
        )


async def _said(interaction: discord.Interaction, outcome: Outcome) -> None:
    """A refusal, said only to the presser; else the message itself shows what happened (a
    redelivered press: nothing, the first delivery's)."""
    if isinstance(outcome, Drop):
        return
    if isinstance(outcome, Refusal):
        await interaction.response.send_message(
            outcome.text, ephemeral=True, allowed_mentions=NO_MENTIONS
        )
    else:
        await interaction.response.defer()
