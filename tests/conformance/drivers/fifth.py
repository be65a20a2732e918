"""The fifth surface's driver (issue 41, slice 9): ``tests/conformance/fifth``, a surface
that is only its translation, its ``Reply`` and its renderer, over the in-memory fake
platform of ``fifth.platform``. Everyone is in the channel ``general``; ``admin`` is one of
the platform's admins (its own fact, as a Telegram chat's administrators); a thread is the
one under the bot's first answer there."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from adapters.channels import ChannelChoices
from adapters.live import RunView
from adapters.policy import AccessPolicy, Policy
from adapters.room import Room
from core.agent import Agent, AgentSettings
from core.approval import ApprovalBroker, InMemoryDecisions, InMemoryPending
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.scripted import ScriptedModel, Turn
from core.stores import RunRecord, Stores
from core.tools import FunctionTool, ToolHints, ToolRegistry
from core.trace import Trace
from tests.conformance.driver import AskHandle, Persona, Said, Spot, normalise
from tests.conformance.fifth.platform import Message, Platform
from tests.conformance.fifth.render import PlainRenderer
from tests.conformance.fifth.translate import NAME, FifthSurface

PEOPLE: dict[Persona, str] = {"asker": "ada", "other": "bob", "admin": "mod"}
CHANNEL = "general"
ACT = Turn("Thought: I will delete it.\nAction: files_delete[report.txt]")
EDITED = "edited.txt"
SUMS = {"17*23+4": "395", "17*23": "391", "2+2": "4"}


async def until(found: Callable[[], Any], *, what: str, within: float = 10.0) -> Any:
    deadline = time.monotonic() + within
    while not (got := found()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {within} s: {what}")
        await asyncio.sleep(0.01)
    return got


class FifthDriver:
    platform = NAME

    def __init__(self, chat: Platform, surface: FifthSurface, model: ScriptedModel) -> None:
        self.chat, self.s, self.model = chat, surface, model
        self.deleted: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: str | None = None

    # ---- what people do ---------------------------------------------------------------------
    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle:
        """Posted now; the platform delivers it to the bot as an event of its own (a burst's
        first message waits its window out meanwhile)."""
        thread = await self._thread_id() if where == "thread" else None
        message = self.chat.post(CHANNEL, PEOPLE[who], text, thread=thread)
        told = len(self._told(who))
        self._tasks.append(asyncio.create_task(self.s.on_message(message)))
        return AskHandle(who, text, message, {"told": told})

    async def _thread_id(self) -> str:
        if self._thread is None:
            first = await until(
                lambda: next(iter(self._bot_messages(lambda m: m.thread is None)), None),
                what="a bot answer to start a thread on",
            )
            self._thread = first.id
        return self._thread

    async def redeliver(self, handle: AskHandle) -> Said:
        told = len(self._told(handle.who))
        await self.s.on_message(handle.ref)
        return self._since(handle.who, told)

    async def running(self, handle: AskHandle) -> None:
        await self._answer(handle, "stop")

    async def refusal(self, handle: AskHandle) -> Said:
        told = handle.extra["told"]
        await until(lambda: len(self._told(handle.who)) > told, what="a refusal")
        assert not self._bot_messages(lambda m: m.reply_to == handle.ref.id), "it was answered"
        return self._since(handle.who, told)

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        return await self._press(who, await self._answer(handle, "stop"), "stop")

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        text = {"edit": EDITED, "deny": "not now"}.get(verdict, "")
        return await self._press(who, await self._answer(handle, verdict), verdict, text=text)

    def ran(self) -> list[object]:
        return list(self.deleted)

    async def orphan(self, question: str) -> AskHandle:
        """A dead process's message (with its Stop) and its run's record, silent for ten
        minutes: this surface's Recovery (``run_lease`` 1 s) is the next process."""
        run_id = "deadrun"
        live = PlainRenderer(run_id).live(RunView(question=question))
        left = self.chat.post(CHANNEL, self.chat.bot, live.text, buttons=live.buttons)
        conversation = f"{NAME}:{CHANNEL}"
        trace = Trace(question=question, conversation=conversation, id=run_id)
        where = {"channel": CHANNEL, "message": left.id}
        dead = RunRecord(run_id, NAME, conversation, "dead", where, trace=trace.to_json())
        await self.s.stores.runs.beat([dead], at=time.time() - 600)
        return AskHandle("asker", question, left)

    async def orphan_finished(self, handle: AskHandle) -> str:
        message: Message = handle.ref
        await until(lambda: any(b.action == "retry" for b in message.buttons), what="Retry")
        return normalise(message.text)

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        return await self._press(who, handle.ref, "retry")

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        return await self._press(who, await self._answer(handle, f"vote:{value}"), f"vote:{value}")

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        return await self._command(who, f"settings {name} {value}")

    async def usage(self, who: Persona) -> Said:
        return await self._command(who, "usage")

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said:
        thread = await self._thread_id() if where == "thread" else None
        return await self._command(who, "reset", thread=thread)

    async def trace(self, who: Persona) -> Said:
        return await self._command(who, "trace")

    # ---- what is seen -----------------------------------------------------------------------
    async def final_text(self, handle: AskHandle) -> str:
        answer = await self._answer(handle, "vote:up")
        await self.settled()
        return normalise(answer.text)

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        stored = await self.s.stores.history.load(conversation or f"{NAME}:{CHANNEL}")
        return [dict(message) for message in stored]

    async def settled(self) -> None:
        await asyncio.gather(*self._tasks)
        await self.s.answering.settled()

    async def traces(self) -> list[Trace]:
        return list(await self.s.stores.traces.recent())

    def named(self, who: Persona) -> str | None:
        return None  # "the person who asked": the platform has no mentions

    # ---- parts ------------------------------------------------------------------------------
    def _bot_messages(self, which: Callable[[Message], bool]) -> list[Message]:
        return [m for m in self.chat.messages.values() if m.author == self.chat.bot and which(m)]

    async def _answer(self, handle: AskHandle, button: str) -> Message:
        """The bot's answer to ``handle`` once it carries ``button``."""
        asked: Message = handle.ref
        found: Message = await until(
            lambda: next(
                iter(
                    self._bot_messages(
                        lambda m: (
                            m.reply_to == asked.id and any(b.action == button for b in m.buttons)
                        )
                    )
                ),
                None,
            ),
            what=f"the answer to {handle.text!r} with {button}",
        )
        return found

    async def _press(self, who: Persona, message: Message, action: str, *, text: str = "") -> Said:
        told = len(self._told(who))
        await self.s.on_press(PEOPLE[who], message.id, action, text=text)
        return self._since(who, told)

    async def _command(self, who: Persona, text: str, *, thread: str | None = None) -> Said:
        told = len(self._told(who))
        await self.s.on_command(PEOPLE[who], CHANNEL, text, thread=thread)
        return self._since(who, told)

    def _told(self, who: Persona) -> list[str]:
        return self.chat.private.get(PEOPLE[who], [])

    def _since(self, who: Persona, told: int) -> Said:
        return normalise(" ".join(self._told(who)[told:]))


@contextlib.asynccontextmanager
async def driving(
    turns: list[Turn | str],
    *,
    merge_window: float = 0.0,
    approval: bool = False,
    lease: float | None = None,
    room: int | None = None,
    elsewhere: bool = False,
) -> AsyncIterator[Any]:
    chat = Platform(admins={PEOPLE["admin"]})
    deleted: list[str] = []

    async def calculate(expression: str) -> str:
        return SUMS.get(expression.strip(), "I only know a few sums")

    async def delete(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    tools = ToolRegistry()
    hints = ToolHints(read_only=True)
    tools.add(FunctionTool("calculate", calculate, "Arithmetic.", "calculate[2+2]", hints=hints))
    tools.add(FunctionTool("files_delete", delete, "Deletes a file.", "files_delete[a.txt]"))
    stores = Stores.in_memory()
    broker = ApprovalBroker(InMemoryDecisions(), InMemoryPending())
    model = ScriptedModel(list(turns))
    agent = Agent(
        model,
        tools,
        stores=stores,
        approve=broker,
        settings=AgentSettings(
            model_timeout=5.0,
            deadline=20.0,
            approval_timeout=20.0,
            approval_tools=frozenset({"files_delete"}) if approval else frozenset(),
        ),
    )
    policy = Policy(NAME, cooldown_seconds=0.0, merge_window=merge_window)
    if lease is not None:
        policy = dataclasses.replace(policy, lease=lease)
    if elsewhere:  # its channel list names another channel
        policy = dataclasses.replace(policy, access=AccessPolicy(places=frozenset({"elsewhere"})))
    surface = FifthSurface(
        chat,
        agent,
        stores=stores,
        budgets=TokenBudgets(InMemoryUsageCounters()),
        choices=ChannelChoices(stores.channel_settings, {}, tools, default_model=model.name),
        policy=policy,
        broker=broker,
        room=None if room is None else Room(room),
    )
    await surface.answering.start()
    driver = FifthDriver(chat, surface, model)
    driver.deleted = deleted
    try:
        yield driver
    finally:
        for task in driver._tasks:
            task.cancel()
        await asyncio.gather(*driver._tasks, return_exceptions=True)
        await surface.answering.aclose(grace=5.0)
        await broker.aclose()
