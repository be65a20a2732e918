"""The slack-bolt app: listeners that ack at once and hand the work to tasks this bot owns.

Flow of one question: a listener acks (``/ask`` with an ephemeral "working on it…"); an
event's message goes through the dispatcher (``adapters.dispatch``: claimed once, Slack's
retries with ``X-Slack-Retry-Num`` dropped; bursts; admission); a task posts the
placeholder (``adapters.slack.reply.SlackReply``: streamed natively where Slack allows,
else chat.update), starts the run and lets ``adapters.live.LiveMessage`` drive the message
to its final state and the trace. ``/ask`` and Retry (once per run) are admitted here until
they go through the dispatcher too.

A Stop press may reach any replica: the dispatcher checks who pressed and from where against
the run's stored record (``adapters.dispatch.handlers.stop``), cancels the run if it is this
replica's, and otherwise publishes a ``StopRequests`` request that the replica running it
hears. A decision (Approve, Edit…, Deny, Allow in this conversation) is checked the same way
(``handlers.decide``) and handed to the ``ApprovalBroker``; Edit and Deny open a modal
first. ``aclose`` stops the runs still going (their messages end "stopped") and awaits
every task, so a shutdown never leaves a message saying "thinking" forever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
)
from functools import partial
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp, AsyncAssistant
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters import words
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.context import Read
from adapters.dispatch.checks import Admitted, Ticket
from adapters.dispatch.commands import Commands
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import Actor, Decide, Retry, Stop, Vote, Where
from adapters.dispatch.intents import Ask as Intent
from adapters.dispatch.outcome import Drop, Refusal
from adapters.pacing import Budget, EditPacer, per_minute
from adapters.policy import Policy
from adapters.room import Room
from adapters.slack.approval import (
    APPROVAL_VIEW_ID,
    VERDICT_OF_ACTION,
    ApprovalRef,
    parse_button_value,
)
from adapters.slack.assistant import LOADING_MESSAGES, assistant_status, thread_title
from adapters.slack.blocks import (
    RETRY_ACTION_ID,
    STOP_ACTION_ID,
    mention,
    parse_stop_value,
    retry_block,
)
from adapters.slack.commands import SharedCommands, click_thread, from_click
from adapters.slack.files import incoming_of
from adapters.slack.history import SlackHistory
from adapters.slack.markdown import escape
from adapters.slack.modals import (
    PERSONA_VIEW_ID,
    FieldErrors,
    decision_for,
    deny_modal,
    edit_modal,
    read_submission,
)
from adapters.slack.payloads import (
    Question,
    click_channel,
    click_places,
    followup_from,
    from_command,
    from_event,
)
from adapters.slack.places import ChannelMembers, SlackPlaces
from adapters.slack.render import SlackRenderer
from adapters.slack.reply import SlackReply, where_of
from adapters.slack.settings import SlackSettings
from adapters.slack.settings_commands import SettingsCommands
from adapters.slack.stream_render import FEEDBACK_ACTION_ID, parse_feedback
from adapters.slack.streaming import (
    StreamPacers,
)
from adapters.slack.surface import make_client
from core.agent import Agent
from core.approval import ApprovalBroker, ApprovalRequest
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.events import Event
from core.stores import RunRecord, Stores
from core.tools import needs_approval
from core.trace import Trace

log = logging.getLogger(__name__)


class _TokenFromEnvironment(logging.Filter):
    """Drops bolt's "As you gave 'client' as well, 'token' will be unused" and nothing else.

    ``AsyncApp`` is given the client (it carries the base URL, the session and the retry
    handlers that every per-request client copies) and no token, which is how bolt takes a
    client. Yet it still reads ``SLACK_BOT_TOKEN`` from the process environment on its own,
    finds the very token that client holds, and warns on every start. No construction
    avoids that lookup while a client is passed (``slack_bolt/app/async_app.py``:
    ``token = token or os.environ.get("SLACK_BOT_TOKEN")``), short of changing the
    environment, so the one message is filtered on bolt's app logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_TOKEN_FROM_ENVIRONMENT = _TokenFromEnvironment()

WORKING = ":hourglass_flowing_sand: Working on it…"
RESTARTING = "reactbot is restarting; ask again in a moment."
USAGE = "Ask me something, for example: `/ask What is 17*23+4?`"
UNREACHABLE = "I could not look this action up just now; try again in a moment."
NAMES_WITHIN = 2.0
"""Seconds the asker's and the channel's names may take to look up (once each: remembered)."""


def _user_key(question: Question) -> str:
    return f"slack:{question.team}:{question.user}"


def workspace_budget(settings: SlackSettings, shared: Budget | None = None) -> Budget | None:
    """Slack limits ``chat.update`` per workspace (Tier 3, "50+ per minute"), so every channel
    draws on one budget: at most that many in any minute, across every replica when
    ``shared`` (Redis) is given, with each replica keeping to it alone while Redis is away."""
    limit = settings.workspace_updates_per_minute
    return per_minute(int(limit), shared) if limit > 0 else None


class SlackBot:
    """Owns the bolt app, the per-channel pacer and every task it starts."""

    def __init__(
        self,
        agent: Agent,
        *,
        stores: Stores,
        settings: SlackSettings,
        policy: Policy,
        broker: ApprovalBroker | None = None,
        update_budget: Budget | None = None,
        budgets: TokenBudgets | None = None,
        choices: ChannelChoices | None = None,
        stream_budgets: Mapping[str, Budget] | None = None,
        client: AsyncWebClient | None = None,
        files: ConversationFiles | None = None,
        trace_link: Callable[[str], str | None] | None = None,
        room: Room | None = None,
    ) -> None:
        self.agent = agent
        self.trace_link = trace_link
        """The signed page of a trace, posted last in its thread (None: no links)."""
        self.stores = stores
        """Every store, shared by every replica when Redis is configured."""
        self.settings = settings
        self.policy = policy
        self.budgets = budgets or TokenBudgets(InMemoryUsageCounters())
        """Daily token limits per user and channel (``budgets.*``), shared likewise."""
        self.choices = choices or ChannelChoices(stores.channel_settings, tools=agent.tools)
        """Each channel's model, persona and tools (``/ask-settings model|prompt|tools``)."""
        self.broker = broker
        self.files = files
        """Attached files as knowledge for the conversation (``files.*``); None: ignored."""
        """The agent's approver: clicks on approval buttons are decided through it (None:
        the buttons are not shown). Not this bot's to close; see ``start``."""
        self._session: aiohttp.ClientSession | None = None
        if client is None:  # ours to close in aclose; must be built inside the running loop
            self._session = aiohttp.ClientSession()
            client = make_client(settings, session=self._session)
        self.client = client
        self.history = SlackHistory(client)
        self.places = SlackPlaces(client)
        """Earlier messages of a thread or channel, read for a mention (``context.*``)."""
        self.pacer = EditPacer(
            settings.update_interval,
            shared=workspace_budget(settings, update_budget),
            # the budget is every replica's: keep a final for each of their runs (and for
            # those a dead replica left), not only for this process's
            in_flight=partial(stores.runs.count, "Slack"),
        )
        self.stream_pacers = StreamPacers.for_workspace(
            settings.update_interval, shared=stream_budgets
        )
        """chat.startStream / appendStream / stopStream, each within its rate tier."""
        # idempotent: the same filter object is added once however many bots start
        logging.getLogger("slack_bolt.AsyncApp").addFilter(_TOKEN_FROM_ENVIRONMENT)
        self.app = AsyncApp(
            name="reactbot",
            client=self.client,
            signing_secret=settings.signing_secret or "",
            request_verification_enabled=True,
        )
        self._started = False
        self.connection: Callable[[], Awaitable[bool]] | None = None
        """Whether Slack reaches the bot now: set by ``adapters.slack.server`` once it listens
        (HTTP mode) or its socket is open (Socket Mode); None before and after."""
        self.answering: Answering[Question] = Answering(
            agent,
            surface="Slack",
            policy=policy,
            stores=stores,
            budgets=self.budgets,
            choices=self.choices,
            files=files,
            broker=broker,
            empty_question=USAGE,
            quote=escape,
            shutdown_by=words.SHUTDOWN,
            finalise=self._finish_orphan,
            room=room,
            # the shared access rule: a DM's channel memberships, the allowed channels named
            members=ChannelMembers(client),
            names=lambda channel: f"<#{channel}>",
        )
        self.dispatcher: Dispatcher[Question] = Dispatcher(
            self.answering, claims=stores.claims, traces=stores.traces
        )
        self.stats = self.answering.stats
        """The live messages' counters of finished runs (for benchmarks and diagnostics)."""
        self.handlers = Commands(
            Services(policy, stores, self.budgets, self.choices, files),
            access=self.answering.access,
        )
        """Votes, reset, trace, settings and usage, decided once (``adapters.dispatch``)."""
        self.shared = SharedCommands(self.handlers, client, tell=self.tell, trace_link=trace_link)
        self.commands = SettingsCommands(self)
        self._register()

    @property
    def running(self) -> tuple[str, ...]:
        """The ids of the runs this process is answering now (stopped ones leave at once)."""
        return self.answering.running

    async def start(self) -> None:
        """Hear stop requests and decisions from other replicas; call once before serving.

        The broker is the application's, shared with any other platform served by this
        process: it is started here (a no-op once started) and closed by whoever made it
        (``App.aclose``), never by this bot, so a Slack bot that fails to start or stops
        early does not cut Discord off from decisions made on other replicas."""
        if not self._started:
            self._started = True
            await self.answering.start()
            p = self.policy
            if self.broker is not None and p.approvers == "admins" and not p.admin_users:
                log.warning(
                    "agent.approval.approvers is 'admins' but slack.admin_users is empty: "
                    "nobody can approve, so every action that needs approval times out"
                )

    # ---- listeners ------------------------------------------------------------------------
    def _register(self) -> None:
        async def on_command(ack: AsyncAck, command: dict[str, Any]) -> None:
            await self._on_command(ack, command)

        async def on_event(
            ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
        ) -> None:
            await ack()
            self._spawn(self._on_event(body, event, context.bot_user_id))

        async def on_stop(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            self._spawn(self._on_stop(body, action))

        async def on_approval(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            self._spawn(self._on_approval(body, action))

        async def on_submission(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
            await self._on_submission(ack, body, view)

        async def on_settings(ack: AsyncAck, command: dict[str, Any]) -> None:
            await self.commands.on_settings(ack, command)

        async def on_feedback(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            self._spawn(self._on_feedback(body, action))

        self.app.use(self._assistant())
        self.app.command("/ask")(on_command)
        self.app.command("/ask-settings")(on_settings)
        self.app.event("app_mention")(on_event)
        self.app.event("message")(on_event)  # DMs; everything else is filtered out
        self.app.action(STOP_ACTION_ID)(on_stop)
        self.app.action(FEEDBACK_ACTION_ID)(on_feedback)

        async def on_retry(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            self._spawn(self._on_retry(body, action))

        self.app.action(RETRY_ACTION_ID)(on_retry)
        for action_id in VERDICT_OF_ACTION:
            self.app.action(action_id)(on_approval)
        self.app.view_submission(APPROVAL_VIEW_ID)(on_submission)

        async def on_persona(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
            await self.commands.on_persona(ack, body, view)

        self.app.view_submission(PERSONA_VIEW_ID)(on_persona)

    def _assistant(self) -> AsyncAssistant:
        """Slack's assistant surface: a new thread gets the suggested prompts; a message in
        one is a question with the thread as its conversation (status, title, streaming)."""
        assistant = AsyncAssistant()

        async def started(payload: dict[str, Any]) -> None:
            self._spawn(self._on_thread_started(payload))

        async def message(
            body: dict[str, Any], payload: dict[str, Any], context: AsyncBoltContext
        ) -> None:
            self._spawn(self._on_event(body, payload, context.bot_user_id, assistant=True))

        assistant.thread_started(started)
        assistant.user_message(message)
        return assistant

    async def _on_thread_started(self, payload: dict[str, Any]) -> None:
        thread = payload.get("assistant_thread") or {}
        channel, thread_ts = str(thread.get("channel_id", "")), str(thread.get("thread_ts", ""))
        prompts = [{"title": t, "message": m} for t, m in self.settings.suggested_prompts]
        if not channel or not thread_ts or not prompts:
            return
        try:
            await self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=prompts
            )
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not set the suggested prompts in %s: %s", channel, exc)

    async def _on_feedback(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A 👍 or 👎 under an answer: a ``Vote`` for the shared handler; only the voter is
        told (ephemerally) what became of it."""
        parsed, user = parse_feedback(str(action.get("value", ""))), body.get("user") or {}
        team, channel = str((body.get("team") or {}).get("id", "")), click_channel(body)
        if parsed is None or not user.get("id") or not channel:
            return
        question = from_click(body, channel, team)
        intent = Vote(event=f"slack:vote:{action.get('action_ts', '')}:{question.user}",
                      actor=self.shared.actor(question), where=where_of(question),
                      run_id=parsed[1], value=parsed[0])  # fmt: skip
        outcome = await self.handlers.dispatch(intent)
        if not isinstance(outcome, Drop):
            await self.ephemeral(channel, question.user, escape(outcome.text),
                                  thread_ts=click_thread(body))  # fmt: skip

    async def _on_command(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        """``/ask``: through ``Dispatcher.dispatch`` (no gathering), acked within Slack's
        3 s however it ends: "working" once admitted, the refusal's words, or nothing for a
        redelivery (the first delivery is being answered)."""
        question = from_command(command)

        async def working() -> None:  # the admitted question is answered whatever the ack
            try:
                await ack(text=WORKING, response_type="ephemeral")
            except Exception:
                log.warning("could not ack /ask %s", question.claim_key, exc_info=True)

        outcome = await self.dispatcher.dispatch(
            self._intent(question), self._reply, answer=self._answer_named, admitted=working
        )
        if isinstance(outcome, Refusal):
            await ack(text=outcome.text, response_type="ephemeral")
        elif isinstance(outcome, Drop):
            await ack()

    async def _on_event(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        bot_user_id: str | None,
        *,
        assistant: bool = False,
    ) -> None:
        event_id, team = str(body.get("event_id", "")), str(body.get("team_id", ""))
        question = from_event(event, event_id=event_id, team=team, bot_user_id=bot_user_id)
        if question is None and not assistant:
            question = await self._followup(event, event_id, team, bot_user_id)
        if question is None:
            return
        if assistant:
            question = dataclasses.replace(question, assistant=True)
        outcome = await self.dispatcher.dispatch(
            self._intent(question, bot_user_id=bot_user_id), self._reply, answer=self._answer_named
        )
        if isinstance(outcome, Refusal):
            await self.tell(question, outcome.text)

    def _reply(self, admitted: Admitted[Question]) -> SlackReply:
        """The reply to an admitted question (a burst's: its merged text)."""
        return SlackReply(self, dataclasses.replace(admitted.who, text=admitted.question))

    async def _answer_named(self, ticket: Ticket[Question], reply: Reply) -> None:
        """Answer an admitted question (an event's, a burst's merged, a command's, a Retry's)
        with the asker's and the channel's names looked up for it, and whether the channel
        is closed (memories told there stay there): for admitted questions only."""
        question = await self.places.placed(ticket.ask.who)  # private? (memories)
        question = dataclasses.replace(question, text=ticket.ask.question)
        named = await self._named(question)
        name = named.user_name or named.user
        actor = dataclasses.replace(ticket.ask.actor, name=name)
        ticket.ask = dataclasses.replace(
            ticket.ask, who=question, actor=actor, channel_name=named.channel_name
        )
        if ticket.ask.where is not None:  # memories as this place may hold them
            ticket.ask = dataclasses.replace(ticket.ask, where=question.where)
        await self.answering.answer(ticket, reply)

    async def _followup(
        self, event: dict[str, Any], event_id: str, team: str, bot_user_id: str | None
    ) -> Question | None:
        """A channel message with no mention that is a question all the same: anything in a
        free-response channel, or (``thread_replies``) a reply in the thread of one of the
        bot's answers: its parent is the bot's, or the bot has answered in that thread."""
        question = followup_from(event, event_id=event_id, team=team, bot_user_id=bot_user_id)
        if question is None:
            return None
        s = self.settings
        if question.channel in s.free_response_channels:
            return question
        if not s.thread_replies or question.thread_ts is None:
            return None
        if bot_user_id is not None and question.parent_user == bot_user_id:
            return question
        return question if await self._answered_in(question) else None

    async def _answered_in(self, question: Question) -> bool:
        """The bot answered in this thread before (its conversation has a history here)."""
        history = self.agent.history
        if not self.policy.per_thread or history is None:
            return False  # one conversation per channel says nothing about this thread
        try:
            return bool(await history.load(question.conversation()))
        except Exception:  # an unreadable store: a reply to someone else's thread stays unanswered
            log.warning("could not tell whether %s is our thread", question.thread_ts)
            return False

    async def _on_stop(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Checked against the run's own record (``Dispatcher.stop``), wherever it runs: the
        button's value names the run, never who may stop it."""
        user = str(body.get("user", {}).get("id", ""))
        run_id, _ = parse_stop_value(str(action.get("value", "")))
        outcome = await self.dispatcher.stop(Stop(run_id=run_id, **self._press(user, body)),
                                             named=_mention)  # fmt: skip
        if isinstance(outcome, Refusal):
            await self.ephemeral(click_channel(body), user, outcome.text)

    def _press(self, user: str, body: dict[str, Any], *, form: bool = False) -> dict[str, Any]:
        """Who clicked, and where (Slack's signed payload, not the value); a modal (``form``)
        has no channel: only its person may submit it, opened after a checked click."""
        team, channel = str((body.get("team") or {}).get("id", "")), click_channel(body)
        actor = Actor("slack", user, f"slack:{team}:{user}", user, admin=self.policy.admin(user))
        return {"event": f"slack:press:{body.get('trigger_id', '')}", "actor": actor,
                "where": Where("slack", "channel", channel, space=team),
                "at": None if form else {"channel": channel}}  # fmt: skip

    async def _on_approval(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A click on an approval button: check who clicked and that the action still waits,
        then decide at once (Approve, Allow in this conversation) or open the Edit or Deny
        modal, prefilled from the request (read from the broker, whichever replica runs it)."""
        user = str(body.get("user", {}).get("id", ""))
        verdict = VERDICT_OF_ACTION.get(str(action.get("action_id", "")))
        ref = parse_button_value(str(action.get("value", "")))
        if verdict is None or ref is None:
            log.warning("ignoring an approval click whose value is not ours")
            return
        channel, thread_ts = self._where_clicked(body, ref)
        decide = Decide(run_id=ref.run_id, step=ref.step, call=ref.call, verdict=verdict,
                        **self._press(user, body))  # fmt: skip
        request = await self._waiting(decide)
        if isinstance(request, str):
            await self.ephemeral(channel, user, request, thread_ts=thread_ts)
            return
        trigger = str(body.get("trigger_id", ""))
        if verdict == "edit":
            problem = await self.open_modal(trigger, edit_modal(ref, request))
            if problem is not None:
                note = words.form_failed(problem, words.BUTTONS["edit"].text)
                await self.ephemeral(channel, user, note, thread_ts=thread_ts)
        elif verdict != "deny" or await self.open_modal(trigger, deny_modal(ref, request)):
            await self._decide(decide, request)  # a deny whose form failed: no reason, as asked

    async def _on_submission(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        """An Edit or Deny modal submitted: decide, or keep it open saying what is wrong."""
        submitted = read_submission(view)
        if submitted is None:
            await ack()
            return
        user, ref = str(body.get("user", {}).get("id", "")), submitted.ref
        # A modal carries no channel: Slack lets only the person it was opened for (after
        # a checked click) submit it, and its metadata is ours; who they are is still checked.
        press = self._press(user, body, form=True)
        request = await self._waiting(Decide(run_id=ref.run_id, step=ref.step, call=ref.call,
                                             verdict="deny", **press))  # fmt: skip
        if isinstance(request, str):
            await ack(response_action="errors", errors={submitted.field: request})
            return
        decision = decision_for(submitted, request, by=user)
        if isinstance(decision, FieldErrors):
            await ack(response_action="errors", errors=decision.errors)
            return
        await ack()
        await self._decide(Decide(run_id=ref.run_id, step=ref.step, call=ref.call, written=True,
                                  verdict=decision.verdict, input=decision.input,
                                  reason=decision.reason, **press), request)  # fmt: skip

    async def _waiting(self, decide: Decide) -> ApprovalRequest | str:
        """The request the presser may decide now, or why not (``Dispatcher.waiting``)."""
        try:
            request = await self.dispatcher.waiting(decide, named=_mention)
        except Exception:  # the shared store is away; a decision could not travel either
            log.warning("could not read the pending request %s", decide.key, exc_info=True)
            return UNREACHABLE
        return request.text if isinstance(request, Refusal) else request

    async def _decide(self, decide: Decide, request: ApprovalRequest) -> None:
        try:
            await self.dispatcher.decide(decide, checked=request)
        except Exception:  # the request times out as denied; the log says why
            log.exception("could not deliver a decision on %s", decide.key)

    async def open_modal(self, trigger: str, view: dict[str, Any]) -> str | None:
        """Open ``view`` for the person who clicked; what went wrong, or None."""
        if not trigger:
            return "the click carried no trigger"
        try:
            await self.client.views_open(trigger_id=trigger, view=view)
        except SlackApiError as exc:
            error = str(exc.response.get("error", "")) if exc.response is not None else ""
            log.warning("views.open refused: %s", error)
            return f"Slack said {error or 'no'}"
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("views.open failed: %s", exc)
            return "Slack could not be reached"
        return None

    def _where_clicked(self, body: dict[str, Any], ref: ApprovalRef) -> tuple[str, str | None]:
        """The channel (and thread) of the message whose button was clicked."""
        active = self.answering.ask_of(ref.run_id)
        container = body.get("container") or {}
        channel = active.who.channel if active is not None else ""
        channel = channel or str(
            (body.get("channel") or {}).get("id") or container.get("channel_id") or ""
        )
        thread_ts = container.get("thread_ts") or (body.get("message") or {}).get("thread_ts")
        return channel, str(thread_ts) if thread_ts else None

    # ---- policy ---------------------------------------------------------------------------
    def _intent(self, question: Question, *, bot_user_id: str | None = None) -> Intent[Question]:
        """The question as the dispatcher reads it; a mention reads the earlier messages of
        its thread or channel; an event's message gathers (a slash command's cannot wait)."""
        files, limit = self.files, self.policy.context.messages
        name, admin = question.user_name or question.user, self.policy.admin(question.user)

        async def earlier() -> Read:
            return await self.history.read(question, limit=limit, bot_user_id=bot_user_id)

        return Intent(
            event=question.claim_key,
            actor=Actor("slack", question.user, _user_key(question), name, admin=admin),
            where=where_of(question),
            question=question.text,
            model=question.model,
            files=incoming_of(question.files, files.downloader) if files is not None else (),
            earlier=earlier if question.source == "mention" else None,
            gathers=question.source != "command",
            memories=question.where,
            who=question,
        )

    async def _named(self, question: Question) -> Question:
        """The asker's and the channel's names for the trace, looked up (and remembered)
        within ``NAMES_WITHIN`` seconds; past it, or refused, the ids stand in."""
        try:
            async with asyncio.timeout(NAMES_WITHIN):
                return await self.history.named(question)
        except TimeoutError:
            log.info(
                "no names for %s within %s s: the ids stand in", question.claim_key, NAMES_WITHIN
            )
            return question

    # ---- answering ------------------------------------------------------------------------
    def stream_thread(self, question: Question) -> str | None:
        """The thread a natively streamed reply goes into, or None for chat.update:
        ``slack.streaming`` (``auto``: DMs and assistant threads only, since in a channel
        everyone must see the live message), a message to reply to (a slash command has
        none), and no tool that may wait for a person's approval (its buttons need the
        chat.update message)."""
        mode = self.settings.streaming
        thread = question.thread_ts or question.message_ts
        if mode == "update" or thread is None:
            return None
        if mode == "auto" and not (question.is_dm or question.assistant):
            return None
        listed = self.agent.settings.approval_tools
        if self.broker is not None and any(needs_approval(t, listed) for t in self.agent.tools):
            return None
        return thread

    async def with_thread_status(
        self, question: Question, events: AsyncIterator[Event]
    ) -> AsyncGenerator[Event, None]:
        """The run's events, and in an assistant thread its phase as the thread's status."""
        shown = ""
        async for event in events:
            if question.assistant:
                status = assistant_status(event)
                if status is not None and status != shown:
                    shown = status
                    self._spawn(self.set_thread_status(question, status))
            yield event

    async def set_thread_status(
        self, question: Question, status: str, *, title: bool = False
    ) -> None:
        """``assistant.threads.setStatus`` (and the title from the question): courtesy only,
        so a failure is logged and the answer goes on."""
        thread = question.thread_ts or question.message_ts
        if thread is None:
            return
        try:
            if title:
                await self.client.assistant_threads_setTitle(
                    channel_id=question.channel, thread_ts=thread, title=thread_title(question.text)
                )
            await self.client.assistant_threads_setStatus(
                channel_id=question.channel,
                thread_ts=thread,
                status=status,
                loading_messages=list(LOADING_MESSAGES) if status else None,
            )
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning(
                "could not set the assistant thread's status in %s: %s", question.channel, exc
            )

    async def _finish_orphan(self, record: RunRecord, trace: Trace, text: str) -> None:
        """The last edit of an answer whose process died: its root message says so (Stop
        gone), or, for a stream that can no longer be stopped, a reply in its thread does."""
        where = record.where
        channel, ts = where.get("channel", ""), where.get("ts", "")
        if not channel or not ts:
            return
        message = SlackRenderer(run_id=record.run_id).plain(text)
        if trace.question:  # Retry asks it again
            message = dataclasses.replace(
                message, blocks=(*message.blocks, retry_block(record.run_id))
            )
        async with self.pacer.slot(channel, priority="final"):
            if where.get("kind") == "stream":
                await self.client.chat_postMessage(
                    channel=channel, thread_ts=ts, unfurl_links=False, **message.kwargs()
                )
            else:
                await self.client.chat_update(channel=channel, ts=ts, **message.kwargs())

    async def _on_retry(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Retry on an interrupted answer: its question asked again by whoever pressed it
        (``Dispatcher.retry``: once per run), in a new message of the channel it was asked
        in; the press was acked already (the answer is a new message)."""
        user = str((body.get("user") or {}).get("id", ""))
        channel = str((body.get("channel") or {}).get("id", ""))
        press = f"slack:retry:{body.get('trigger_id') or action.get('action_ts', '')}"
        places = click_places(body, channel) if user and channel else set()
        question = Question(source="command", team=str((body.get("team") or {}).get("id", "")),
                            channel=channel, user=user, text="", thread_ts=None, claim_key=press)  # fmt: skip
        retry = Retry(run_id=str(action.get("value", ""))[:64], places=places,
                      event=press, actor=self.shared.actor(question), where=where_of(question))  # fmt: skip
        outcome = await self.dispatcher.retry(
            retry,
            lambda text: self._intent(dataclasses.replace(question, text=text)),
            self._reply,
            answer=self._answer_named,
        )
        if isinstance(outcome, Refusal):
            await self.ephemeral(channel, user, outcome.text)

    async def note_in_thread(self, channel: str, thread_ts: str, text: str) -> None:
        """One short message in the answer's thread (the refused files); never raises."""
        try:
            # Unpaced: chat.postMessage has its own limit, not chat.update's budget (issue 42)
            await self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=escape(text), unfurl_links=False
            )
        except SlackClientError as exc:
            log.warning("could not say which files were refused in %s: %s", channel, exc)

    async def tell(self, question: Question, text: str) -> None:
        """An ephemeral note to the asker: via response_url for commands (works even where
        the bot is not a member), chat.postEphemeral otherwise."""
        if question.response_url:
            try:
                await AsyncWebhookClient(question.response_url).send(
                    text=text, response_type="ephemeral"
                )
            except Exception:  # a lost courtesy note must not hide the original cause
                log.exception("could not answer via response_url")
            return
        await self.ephemeral(question.channel, question.user, text, thread_ts=question.thread_ts)

    async def ephemeral(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> None:
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread_ts
            )
        except SlackApiError as exc:
            log.warning("ephemeral message to %s failed: %s", user, exc.response.get("error"))

    # ---- tasks ----------------------------------------------------------------------------
    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self.answering.spawn(work)

    @property
    def in_flight(self) -> int:
        return len(self.answering.tasks)

    async def settled(self) -> None:
        """Return once every task this bot spawned (answers, their threads) is done."""
        await self.answering.settled()

    async def aclose(self) -> None:
        """Stop runs (their messages say so), then wait for every task, up to the grace."""
        await self.answering.aclose(grace=self.settings.shutdown_grace)
        if self._session is not None:
            await self._session.close()


def _mention(user: str) -> str | None:
    return mention(user) if user else None
