"""The fifth surface: the fake platform's events translated into intents, each handed to
``adapters.dispatch`` (the dispatcher for questions and presses, the command chain for the
rest). Its refusals and replies are said privately to the person (an ephemeral note).

::

    a message (in a channel or a thread)   -> Ask
    a button: stop / approve|edit|deny|always / retry / vote:up|down
                                           -> Stop / Decide / Retry (Dispatcher.retry) / Vote
    a command: reset, trace, usage, settings [verbosity LEVEL | model [NAME|default] |
               persona [TEXT|clear] | tools [NAME]]
                                           -> Reset / ShowTrace / Usage / Settings
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, cast, get_args

from adapters import words
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted
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
    SetModel,
    SetPersona,
    Settings,
    SettingsChange,
    SetVerbosity,
    ShowModels,
    ShowPersona,
    ShowSettings,
    ShowTools,
    ShowTrace,
    Stop,
    ToggleTool,
    Usage,
    Verdict,
    Vote,
    Where,
)
from adapters.dispatch.outcome import Done, Outcome, Refusal, Said
from adapters.live import VERBOSITIES
from adapters.pacing import EditPacer
from adapters.policy import Policy
from adapters.room import Room
from core.agent import Agent
from core.approval import ApprovalBroker
from core.budgets import TokenBudgets
from core.stores import Stores
from tests.conformance.fifth.platform import Message, Platform
from tests.conformance.fifth.reply import Asked, FifthReply, finisher

NAME = "fifth"
VERDICTS: tuple[str, ...] = get_args(Verdict)
EMPTY_QUESTION = "Ask me something."  # no shared words for it yet: a finding (see driver)


class FifthSurface:
    def __init__(
        self,
        platform: Platform,
        agent: Agent,
        *,
        stores: Stores,
        budgets: TokenBudgets,
        choices: ChannelChoices,
        policy: Policy,
        broker: ApprovalBroker | None = None,
        room: Room | None = None,
        files: ConversationFiles | None = None,
    ) -> None:
        self.platform = platform
        self.stores = stores
        self.pacer = EditPacer(0.1)
        self.answering: Answering[Asked] = Answering(
            agent,
            surface=NAME,
            policy=policy,
            stores=stores,
            budgets=budgets,
            choices=choices,
            broker=broker,
            empty_question=EMPTY_QUESTION,
            quote=lambda text: text,
            finalise=finisher(platform, policy.verbosity),
            room=room,
            files=files,
        )
        self.dispatcher: Dispatcher[Asked] = Dispatcher(
            self.answering, claims=stores.claims, traces=stores.traces
        )
        self.commands = Commands(
            Services(policy, stores, budgets, choices, files), access=self.answering.access
        )
        self._presses = itertools.count(1)

    # ---- translation ------------------------------------------------------------------------
    def actor(self, person: str) -> Actor:
        admin = person in self.platform.admins  # the platform's own fact, as Telegram's
        return Actor(NAME, person, f"{NAME}:{person}", person, admin=admin)

    @staticmethod
    def where(channel: str, thread: str | None = None) -> Where:
        if thread is None:
            return Where(NAME, "channel", channel, name=f"#{channel}")
        return Where(NAME, "thread", channel, thread=thread, name=f"#{channel}")

    async def on_message(self, message: Message) -> None:
        asked = (message.author, message.id)
        outcome = await self._ask(asked, message, message.text, event=f"{NAME}:{message.id}")
        self._tell(message.author, outcome)

    async def _ask(
        self, asked: Asked, at: Message, text: str, *, event: str, gathers: bool = True
    ) -> Outcome:
        """``text`` asked by ``asked[0]`` where ``at`` is, answered in reply to ``asked[1]``."""
        ask = self._ask_of(asked, at, text, event=event, gathers=gathers)
        return await self.dispatcher.dispatch(ask, self._reply(ask.where))

    def _ask_of(
        self, asked: Asked, at: Message, text: str, *, event: str = "", gathers: bool = True
    ) -> Ask[Asked]:
        return Ask(
            event=event,
            actor=self.actor(asked[0]),
            where=self.where(at.channel, at.thread),
            question=text,
            gathers=gathers,
            who=asked,
        )

    def _reply(self, where: Where) -> Callable[[Admitted[Asked]], FifthReply]:
        def reply(admitted: Admitted[Asked]) -> FifthReply:
            conversation = self.dispatcher.conversation
            return FifthReply(self.platform, self.pacer, where, conversation, admitted.who)

        return reply

    async def on_press(self, person: str, message_id: str, action: str, *, text: str = "") -> None:
        """A press on a button of ``message_id`` (``text``: the form's, for edit and deny)."""
        message = self.platform.messages[message_id]
        value = self.platform.button(message_id, action).value
        pressed: dict[str, Any] = {
            "event": f"{NAME}:press:{next(self._presses)}",
            "actor": self.actor(person),
            "where": self.where(message.channel, message.thread),
            "at": {"channel": message.channel, "message": message.id},
        }
        outcome: Outcome
        if action == "stop":
            outcome = await self.dispatcher.stop(Stop(run_id=value, **pressed))
        elif action in VERDICTS:
            run_id, step, call = value.rsplit(":", 2)
            outcome = await self.dispatcher.decide(
                Decide(
                    run_id=run_id,
                    step=int(step),
                    call=int(call),
                    verdict=cast(Verdict, action),
                    input=text if action == "edit" else None,
                    reason=text,
                    written=bool(text),
                    **pressed,
                )
            )
        elif action == "retry":
            outcome = await self._retry(person, message, value, pressed["event"])
        else:
            vote: Literal["up", "down"] = "up" if action == "vote:up" else "down"
            outcome = await self._command(
                person, Vote, message.channel, message.thread, run_id=value, value=vote
            )
        self._tell(person, outcome)

    async def _retry(self, person: str, message: Message, run_id: str, event: str) -> Outcome:
        """Retry under ``message``: ``Dispatcher.retry`` (the press once, the run once, given
        back when refused), the question asked again here in reply to that message."""
        where = self.where(message.channel, message.thread)
        asked = (person, message.id)
        retry = Retry(event=event, actor=self.actor(person), where=where, run_id=run_id,
                      places={self.dispatcher.conversation(where)})  # fmt: skip
        ask = self._ask_of(asked, message, "")
        return await self.dispatcher.retry(
            retry, lambda question: replace(ask, question=question), self._reply(where)
        )

    async def on_command(
        self, person: str, channel: str, text: str, *, thread: str | None = None
    ) -> None:
        name = (text.split() or [""])[0]
        kinds: dict[str, type[Command]] = {"reset": Reset, "trace": ShowTrace, "usage": Usage}
        if name in kinds:
            self._tell(person, await self._command(person, kinds[name], channel, thread))
        elif name == "settings" and (change := settings_change(text)) is not None:
            self._tell(
                person, await self._command(person, Settings, channel, thread, change=change)
            )
        else:  # the only words a command's usage has today are the web's verbosity line
            self.platform.tell(person, words.VERBOSITY_CHOICES)

    async def _command(
        self, person: str, kind: type[Command], channel: str, thread: str | None, **given: Any
    ) -> Refusal | Said | Any:
        event = f"{NAME}:cmd:{next(self._presses)}"
        intent = kind(
            event=event, actor=self.actor(person), where=self.where(channel, thread), **given
        )
        return await self.commands.dispatch(intent)

    # ---- what the person is told ------------------------------------------------------------
    def _tell(self, person: str, outcome: Outcome) -> None:
        if isinstance(outcome, Refusal):
            self.platform.tell(person, outcome.text)
        elif isinstance(outcome, Said):
            shown = outcome.text.replace("**", "")
            if outcome.trace is not None:  # the trace as an attached text file
                shown += "\n" + outcome.trace.to_markdown()[:3_000]
            self.platform.tell(person, shown)
        elif isinstance(outcome, Done) and outcome.ack:
            self.platform.tell(person, outcome.ack)


def settings_change(text: str) -> SettingsChange | None:
    """``settings [verbosity LEVEL | model [NAME] | persona [TEXT|clear] | tools [NAME]]``
    as its change (a persona's text as typed, lines and all); None: none of these."""
    _, what, rest = [*text.strip().split(None, 2), "", ""][:3]
    rest = rest.strip()
    match what, rest:
        case "", _:
            return ShowSettings()
        case "verbosity", level if level in VERBOSITIES:
            return SetVerbosity(cast(Any, level))
        case "model", "":
            return ShowModels()
        case "model", name:
            return SetModel(name)
        case "persona", "":
            return ShowPersona()
        case "persona", persona:
            return SetPersona("" if persona.lower() == "clear" else persona)
        case "tools", "":
            return ShowTools()
        case "tools", tool:
            return ToggleTool(tool)
    return None
