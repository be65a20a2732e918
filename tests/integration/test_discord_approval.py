"""Approvals on Discord: the real discord.py client against the fake gateway and REST. The
pending step shows its buttons; a click (interaction type 3) approves or opens a modal, whose
submit (type 5) edits or denies; the callbacks go through the interaction routes. Two
processes sharing Redis: a click on the process that does not run the run still decides it."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from adapters import words
from adapters.discord.client import ReactBot, create_bot
from adapters.discord.cog import Services
from adapters.discord.settings import DiscordSettings
from core.agent import Agent, AgentSettings
from core.approval import ApprovalBroker, InMemoryAllowances, InMemoryDecisions, InMemoryPending
from core.history import InMemoryHistoryStore
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryRunRegistry, InMemoryTraceStore
from core.stores.redis import connect
from core.tools import FunctionTool, ToolHints, ToolRegistry
from core.trace import Trace
from tests.fakes.discord_limits import invalid_form, max_length
from tests.fakes.discord_server import CHANNEL_ID, ROLE_ID, Call, FakeDiscord
from tests.integration.test_discord import content_of
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

SAVE = "Thought: I will save the note.\nAction: save_note[buy milk]"
DONE = "Thought: done.\nAction: finish[Saved.]"


@dataclass
class Process:
    bot: ReactBot
    model: ScriptedModel
    traces: InMemoryTraceStore
    ran: list[str]


@dataclass
class Bots:
    fake: FakeDiscord
    processes: list[Process]

    async def send(self, to: int, event: str, data: dict[str, Any]) -> None:
        await self.fake.dispatch_to(to, event, data)

    async def buttons(
        self, *, within: float = 5.0, besides: int | None = None
    ) -> tuple[int, dict[str, str]]:
        """A live message showing decision buttons (not ``besides``): its id and the custom
        ids by verdict."""

        def pending(call: Call) -> bool:
            return "reactbot:decide:" in _dumped(call) and not call.path.endswith(f"/{besides}")

        call = await self.fake.wait_for_call(pending, within=within)
        ids = [
            item["custom_id"]
            for row in call.json["components"]
            for item in row["components"]
            if item["custom_id"].startswith("reactbot:decide:")
        ]
        message_id = int(call.path.rsplit("/", 1)[1])
        return message_id, {i.split(":")[5]: i for i in ids}

    async def trace(self, index: int = 0) -> Trace:
        await self.fake.wait_for_call(lambda c: content_of(c).startswith("**Totals**"), within=10)
        found = await self.processes[index].traces.last(f"discord:{CHANNEL_ID}")
        assert found is not None
        return found


def _dumped(call: Call) -> str:
    return json.dumps(call.json) if call.method == "PATCH" else ""


def callbacks(fake: FakeDiscord) -> list[Call]:
    return [c for c in fake.calls if c.path.endswith("/callback")]


@contextlib.asynccontextmanager
async def bots(
    scripts: list[list[Turn | str]],
    *,
    redis: tuple[str, str] | None = None,
    approval_timeout: float = 30.0,
    **settings: Any,
) -> AsyncIterator[Bots]:
    fake = FakeDiscord(identify_interval=0.0)
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    opened = [connect(redis[0], prefix=redis[1]) for _ in scripts] if redis else []
    local = (InMemoryDecisions(), InMemoryPending(), InMemoryAllowances())
    local_runs = InMemoryRunRegistry()  # which runs live, and who asked each: every process's
    processes: list[Process] = []
    tasks: list[asyncio.Task[None]] = []
    own, rules = split("discord", **{"cooldown_seconds": 0, **settings})
    try:
        for index, script in enumerate(scripts):
            decisions, pending, allowances = (
                (opened[index].decisions, opened[index].pending, opened[index].allowances)
                if redis
                else local
            )
            ran: list[str] = []

            async def save_note(text: str, ran: list[str] = ran) -> str:
                ran.append(text)
                return f"saved {text!r}"

            tools = ToolRegistry()
            tools.add(
                FunctionTool(
                    "save_note", save_note, "Saves a note.", "save_note[x]", hints=ToolHints()
                )
            )
            broker = ApprovalBroker(decisions, pending)
            model, traces = ScriptedModel(list(script)), InMemoryTraceStore()
            history = InMemoryHistoryStore()
            agent = Agent(
                model,
                tools,
                history=history,
                traces=traces,
                locks=InMemoryLocks(),
                approve=broker,
                allowances=allowances,
                settings=AgentSettings(approval_timeout=approval_timeout),
            )
            services = Services(
                agent,
                in_memory_stores(
                    history=history,
                    traces=traces,
                    runs=opened[index].runs if redis else local_runs,
                ),
                DiscordSettings(
                    api_base_url=fake.api_base_url,
                    edit_interval=0.25,
                    tick=0.25,
                    guild_ready_timeout=0.05,
                    **{"layout": "text", **own},
                ),
                rules,
                broker=broker,
            )
            bot = create_bot(services)
            tasks.append(asyncio.create_task(bot.start("fake-token")))
            processes.append(Process(bot, model, traces, ran))
            async with asyncio.timeout(10):
                while not (bot.is_ready() and len(fake.live_sessions) == index + 1):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        yield Bots(fake, processes)
    finally:
        for process in reversed(processes):
            await process.bot.close()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for stores in opened:
            await stores.aclose()
        await fake.stop()


async def test_approve_runs_the_tool_and_the_step_says_who() -> None:
    async with bots([[SAVE, DONE]]) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note: buy milk"))
        message_id, ids = await b.buttons()
        pending = content_of(b.fake.calls_to("PATCH", f"/messages/{message_id}")[-1])
        assert "✋ Waiting for approval" in pending and "**Action** `save_note`" in pending
        assert "```\nbuy milk\n```" in pending
        assert "only <@1001> or an admin can decide · denied automatically in 0:" in pending
        assert set(ids) == {"approve", "edit", "deny", "always"}
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["approve"]))
        trace = await b.trace()
        assert b.processes[0].ran == ["buy milk"]
        assert trace.steps[0].approval is not None
        assert trace.steps[0].approval.describe() == "✅ approved by ada"
        assert trace.steps[0].approval.by_id == "1001"  # a display name may change; the id not
        assert callbacks(b.fake)[0].json["type"] == 6  # acknowledged without a message
        final = b.fake.calls_to("PATCH", f"/messages/{message_id}")[-1]
        assert "reactbot:decide:" not in json.dumps(final.json)  # the buttons are gone
        thread = [content_of(c) for c in b.fake.calls if c.path.endswith("/messages")]
        assert any("-# ✅ approved by ada" in text for text in thread)


async def test_edit_opens_a_prefilled_modal_and_runs_the_edited_input() -> None:
    async with bots([[SAVE, DONE]]) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note"))
        message_id, ids = await b.buttons()
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["edit"]))
        await b.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and c.json.get("type") == 9
        )
        (modal,) = b.fake.modals
        assert modal["title"] == "Edit the input to save_note"
        labels = {c["label"]: c["component"] for c in modal["components"]}
        assert labels["Input"]["value"] == "buy milk" and labels["Input"]["style"] == 2
        submit = b.fake.modal_submit(modal["custom_id"], {"input": "buy oat milk", "reason": ""})
        await b.send(0, "INTERACTION_CREATE", submit)
        trace = await b.trace()
        assert b.processes[0].ran == ["buy oat milk"]
        step = trace.steps[0]
        assert step.action_input == "buy oat milk"
        assert step.approval is not None and step.approval.input == "buy milk"
        assert (step.approval.by, step.approval.by_id) == ("ada", "1001")
        assert (step.observation or "").startswith("Note: a person edited the input")


async def test_deny_with_a_reason_and_a_stranger_cannot_decide() -> None:
    async with bots([[SAVE, DONE]]) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note"))
        message_id, ids = await b.buttons()
        stranger = b.fake.button_press(message_id, ids["approve"], author_id=2002, user_name="mal")
        await b.send(0, "INTERACTION_CREATE", stranger)
        refusal = await b.fake.wait_for_call(lambda c: c.path.endswith("/callback"))
        assert refusal.json["data"]["flags"] == 64
        assert refusal.json["data"]["content"] == (words.decide_refused("asker", "<@1001>"))
        assert refusal.json["data"]["allowed_mentions"]["parse"] == []
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["deny"]))
        await b.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and c.json.get("type") == 9
        )
        (modal,) = b.fake.modals
        assert [c["label"] for c in modal["components"]] == ["Reason (optional)"]
        await b.send(
            0, "INTERACTION_CREATE", b.fake.modal_submit(modal["custom_id"], {"reason": "not now"})
        )
        trace = await b.trace()
        assert b.processes[0].ran == []
        assert trace.steps[0].observation == "The user denied this action. Their reason: not now"
        assert trace.steps[0].approval.describe() == '🚫 denied by ada: "not now"'  # type: ignore[union-attr]
        assert trace.steps[0].approval.by_id == "1001"  # type: ignore[union-attr]


async def test_an_admin_may_decide_and_no_decision_in_time_is_a_denial() -> None:
    async with bots([[SAVE, DONE, SAVE, DONE]], approval_timeout=0.6) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("first"))
        message_id, ids = await b.buttons()
        admin = b.fake.button_press(
            message_id, ids["approve"], author_id=3003, user_name="mod", roles=(ROLE_ID,)
        )
        await b.send(0, "INTERACTION_CREATE", admin)
        first = await b.trace()
        assert first.steps[0].approval.describe() == "✅ approved by mod"  # type: ignore[union-attr]
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("second"))
        await b.fake.wait_for_calls(lambda c: content_of(c).startswith("**Totals**"), 2, within=10)
        second = await b.processes[0].traces.last(f"discord:{CHANNEL_ID}")
        assert second is not None and second.id != first.id
        assert second.steps[0].observation == "No decision within 0.6 s, so the action was not run."
        assert second.steps[0].approval.describe() == "⌛ no decision in time: denied"  # type: ignore[union-attr]


async def test_stop_while_waiting_and_allow_for_the_conversation() -> None:
    async with bots([[SAVE, SAVE, DONE, SAVE, DONE]]) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("first"))
        message_id, _ = await b.buttons()
        stop = next(
            item["custom_id"]
            for row in b.fake.calls_to("PATCH", f"/messages/{message_id}")[-1].json["components"]
            for item in row["components"]
            if item["custom_id"].startswith("reactbot:stop:")
        )
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, stop))
        stopped = await b.trace()
        assert stopped.status == "cancelled" and stopped.stopped_by == "ada"

        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("second"))
        message_id, ids = await b.buttons(besides=message_id)
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["always"]))
        await b.fake.wait_for_calls(lambda c: content_of(c).startswith("**Totals**"), 2, within=10)
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("third"))
        await b.fake.wait_for_calls(lambda c: content_of(c).startswith("**Totals**"), 3, within=10)
        third = await b.processes[0].traces.last(f"discord:{CHANNEL_ID}")
        assert third is not None
        assert third.steps[0].approval.describe() == "✅ allowed for this conversation by ada"  # type: ignore[union-attr]
        assert b.processes[0].ran == ["buy milk", "buy milk"]


async def test_a_click_on_the_other_process_decides_the_run(
    redis_url: str, redis_prefix: str
) -> None:
    async with bots([[SAVE, DONE], []], redis=(redis_url, redis_prefix)) as b:
        owner, other = b.processes
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note"))
        message_id, ids = await b.buttons()
        await b.send(1, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["edit"]))
        await b.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and c.json.get("type") == 9
        )
        (modal,) = b.fake.modals  # the other process read the pending input from Redis
        assert modal["components"][0]["component"]["value"] == "buy milk"
        submit = b.fake.modal_submit(modal["custom_id"], {"input": "buy bread", "reason": "ok"})
        await b.send(1, "INTERACTION_CREATE", submit)
        trace = await b.trace()
        assert owner.ran == ["buy bread"] and other.ran == []
        assert (
            trace.steps[0].approval.describe()
            == '✏️ edited by ada (the model wrote: buy milk): "ok"'
        )  # type: ignore[union-attr]
        assert other.model.calls == []


async def test_a_forged_decision_at_the_other_process_is_refused(
    redis_url: str, redis_prefix: str
) -> None:
    async with bots([[SAVE, DONE], []], redis=(redis_url, redis_prefix)) as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note"))
        message_id, ids = await b.buttons()
        real = ids["approve"]
        forged = real.rsplit(":", 1)[0] + ":2002"  # naming the clicker as the asker
        press = b.fake.button_press(message_id, real, author_id=2002, user_name="mallory")
        # discord.py answers only a custom id the pressed message carries: a forged copy
        await b.send(1, "INTERACTION_CREATE", json.loads(json.dumps(press).replace(real, forged)))
        refusal = await b.fake.wait_for_call(lambda c: c.path.endswith("/callback"))
        said = refusal.json["data"]["content"]
        assert said == words.decide_refused("asker", "<@1001>"), said
        assert b.processes[0].ran == []
        await b.send(1, "INTERACTION_CREATE", b.fake.button_press(message_id, real))
        await b.trace()
        assert b.processes[0].ran == ["buy milk"]


async def test_buttons_on_an_edit_discord_refused_go_again_with_the_next_edit() -> None:
    # The edit that first carries the decision buttons is refused: the next edit must carry
    # them again (Discord kept the old components: without them, nobody could decide).
    async with bots([[SAVE, DONE]]) as b:
        b.fake.refuse_next(
            "PATCH",
            "/messages/",
            invalid_form({"content": {"_errors": [max_length(2000)]}}),
            when=lambda body: "reactbot:decide:" in json.dumps(body),
        )
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note: buy milk"))
        shown = await b.fake.wait_for_call(
            lambda c: c.status == 200 and "reactbot:decide:" in _dumped(c), within=5
        )
        refused = [c for c in b.fake.calls if c.status == 400]
        assert len(refused) == 1 and "reactbot:decide:" in _dumped(refused[0])
        message_id, ids = await b.buttons()
        assert shown.at > refused[0].at
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["approve"]))
        await b.trace()
        assert b.processes[0].ran == ["buy milk"]
