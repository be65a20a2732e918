"""The Slack bot end to end: the real bolt app served over HTTP on a free port, signed
requests posted to it, its Web API client pointed at a local fake Slack, scripted models."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.signature import SignatureVerifier

from adapters import words
from adapters.channels import ChannelChoices
from adapters.pacing import Budget, LocalBudget
from adapters.room import Room
from adapters.slack.blocks import STOP_ACTION_ID
from adapters.slack.bot import SlackBot
from adapters.slack.markdown import escape, to_mrkdwn
from adapters.slack.reply import INVITE
from adapters.slack.server import HttpServer
from adapters.slack.settings import SlackSettings
from core.agent import Agent, AgentSettings
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.errors import ModelError
from core.history import InMemoryHistoryStore
from core.llm import ChatModel, Usage
from core.pricing import Price
from core.scripted import ScriptedModel, Turn
from core.stores import (
    Cooldowns,
    InMemoryLocks,
    InMemoryTraceStore,
    RunRegistry,
    StopRequests,
)
from core.stores.redis import RedisRateBudget, RedisStores
from core.tools import FunctionTool, ToolDisplay, ToolRegistry, ToolResult
from tests.fakes.slack_server import BOT_USER_ID, TEAM_ID, FakeSlack, Message, message_text
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

SECRET = "test-signing-secret-0123456789"
INTERVAL = 0.25
ASKER = "U1ADA"
CHANNEL = "C1GENERAL"


async def calculate(arg: str) -> str:
    await asyncio.sleep(0.3)  # long enough for the live message to show the Action
    return {"17*23": "391"}.get(arg.replace(" ", ""), "42")


LONG_URLS = tuple(f"https://evil.example/{n}/" + "p" * 1990 for n in range(3))
"""Sources of about 2,000 characters each, as a web page can have."""
SHORT_URL = "https://docs.example.org/page?a=1&b=2"
HOSTILE = (
    "<!channel> <!here> <!everyone> <@U999> <#C123ABC> <!subteam^S1|@team> "
    "[Verify your account](https://evil.example) <https://evil.example|Verify> &lt;!here&gt; "
)


async def search(arg: str) -> ToolResult:
    """A web page that tries everything: pings, masked links, fences, 20 KB of text."""
    page = (HOSTILE + "```\n" + "lorem ipsum " * 50 + "\n") * 25
    return ToolResult(page, sources=(*LONG_URLS, SHORT_URL))


@dataclass
class Harness:
    fake: FakeSlack
    bot: SlackBot
    model: ScriptedModel
    url: str
    session: aiohttp.ClientSession
    _triggers: int = 0

    async def post(self, body: str, content_type: str, **headers: str) -> tuple[int, str, float]:
        timestamp = str(int(time.time()))
        signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature or "",
            **headers,
        }
        started = time.monotonic()
        async with self.session.post(self.url, data=body.encode(), headers=sent) as response:
            text = await response.text()
        return response.status, text, time.monotonic() - started

    async def ask(
        self, text: str, *, user: str = ASKER, channel: str = CHANNEL, command: str = "/ask"
    ) -> tuple[int, str, float]:
        self._triggers += 1
        form = {
            "command": command,
            "text": text,
            "user_id": user,
            "user_name": "ada",
            "channel_id": channel,
            "channel_name": "general" if channel == CHANNEL else "directmessage",
            "team_id": TEAM_ID,
            "trigger_id": self.fake.trigger(),  # one Slack minted: views.open takes it
            "response_url": self.fake.response_url(f"cmd{self._triggers}"),
        }
        return await self.post(urllib.parse.urlencode(form), "application/x-www-form-urlencoded")

    async def event(
        self, event: dict[str, Any], *, event_id: str, **headers: str
    ) -> tuple[int, str, float]:
        body = {
            "token": "legacy",
            "team_id": TEAM_ID,
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": {"team": TEAM_ID, "event_ts": event.get("ts", "1.0"), **event},
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
        }
        return await self.post(json.dumps(body), "application/json", **headers)

    async def press_stop(self, run_id: str, *, user: str) -> tuple[int, str, float]:
        payload = {
            "type": "block_actions",
            "user": {"id": user},
            "team": {"id": TEAM_ID},
            "channel": {"id": CHANNEL},
            "trigger_id": f"press.{uuid.uuid4().hex}",  # Slack mints one per press
            "api_app_id": "A1",
            "container": {"type": "message", "channel_id": CHANNEL},
            "actions": [
                {
                    "type": "button",
                    "action_id": STOP_ACTION_ID,
                    "block_id": "b",
                    "value": run_id,
                    "action_ts": "1",
                }
            ],
        }
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return await self.post(body, "application/x-www-form-urlencoded")

    async def settled(self) -> None:
        """Every task the bot started has ended (final edits and trace posts included)."""
        async with asyncio.timeout(10):
            await self.bot.settled()

    def root(self, channel: str = CHANNEL) -> Message:
        roots = self.fake.roots(channel)
        assert len(roots) == 1, roots
        return roots[0]


async def eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110 - polls state owned by the bot and the fake
            await asyncio.sleep(0.01)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def make(fake: FakeSlack) -> AsyncIterator[Callable[..., Any]]:
    """``await make(turns, **settings)`` -> a served Harness; torn down after the test."""
    async with serving(fake) as build:
        yield build


@contextlib.asynccontextmanager
async def serving(fake: FakeSlack) -> AsyncIterator[Callable[..., Any]]:
    """``make`` outside pytest's fixtures (the conformance drivers use it)."""
    opened: list[tuple[HttpServer, SlackBot, aiohttp.ClientSession]] = []

    async def build(
        turns: list[Turn | str],
        *,
        cooldowns: Cooldowns | None = None,
        stops: StopRequests | None = None,
        runs: RunRegistry | None = None,
        update_budget: Budget | None = None,
        budgets: TokenBudgets | None = None,
        catalogue: dict[str, ChatModel] | None = None,
        room: Room | None = None,
        price: Price | None = None,
        **overrides: Any,
    ) -> Harness:
        model = ScriptedModel(turns)
        tools = ToolRegistry()
        tools.add(
            FunctionTool(
                "calculate",
                calculate,
                description="arithmetic",
                example="calculate[1+1]",
                display=ToolDisplay("🧮", "Calculating"),
            )
        )
        tools.add(FunctionTool("search", search, description="the web", example="search[x]"))
        agent = Agent(
            model,
            tools,
            history=InMemoryHistoryStore(),
            traces=InMemoryTraceStore(),
            locks=InMemoryLocks(),
            settings=AgentSettings(model_timeout=5.0, deadline=20.0),
            prices={model.name: price} if price is not None else None,
        )
        settings = SlackSettings(
            bot_token="xoxb-test",
            signing_secret=SECRET,
            mode="http",
            host="127.0.0.1",
            port=0,
            api_base_url=fake.base_url,
            update_interval=INTERVAL,
            # These tests look at per-channel pacing; the workspace budget has its own tests
            # (tests/unit/test_live.py) and would only slow them down here.
            workspace_updates_per_minute=0,
            shutdown_grace=3.0,
        )
        own, policy = split(
            "slack", **{"admin_users": frozenset({"UADMIN"}), "cooldown_seconds": 0.0, **overrides}
        )
        settings = replace(settings, **own)
        stores = in_memory_stores(  # the agent's history and traces, as served (one store)
            cooldowns=cooldowns,
            stops=stops,
            runs=runs,
            history=agent.history,
            traces=agent.traces,
        )
        shared = stores.channel_settings
        bot = SlackBot(
            agent,
            stores=stores,
            settings=settings,
            policy=policy,
            update_budget=update_budget,
            budgets=budgets,
            choices=ChannelChoices(shared, catalogue or {}, tools, default_model=model.name),
            room=room,
        )
        await bot.start()
        server = HttpServer(bot, host="127.0.0.1", port=0, path=settings.path)
        port = await server.start()
        session = aiohttp.ClientSession()
        opened.append((server, bot, session))
        return Harness(fake, bot, model, f"http://127.0.0.1:{port}/slack/events", session)

    try:
        yield build
    finally:
        for server, bot, session in opened:
            await server.stop()
            await bot.aclose()
            await session.close()


def tool_then_answer(answer: str = "17*23 = 391.", *, delay: float = 0.0) -> list[Turn | str]:
    return [
        Turn(
            "Thought: This is arithmetic; I will use the calculator.\nAction: calculate[17*23]",
            chunk_size=6,
            delay=delay,
            usage=Usage(50, 12),
        ),
        Turn(
            f"Thought: I have the result.\nAction: finish[{answer}]",
            chunk_size=6,
            delay=delay,
            usage=Usage(70, 10),
        ),
    ]


# ---- the happy path -----------------------------------------------------------------------


async def test_slash_command_acks_at_once_and_the_message_goes_live_to_the_answer(
    make: Any,
) -> None:
    # Two runs share one scripted model and take turns in call order: script both alike.
    # The answer streams slowly enough (~0.7 s) for a paced edit to show step 1 as a line.
    tool, _ = tool_then_answer(delay=0.03)
    _, finish = tool_then_answer(delay=0.08)
    h: Harness = await make([tool, tool, finish, finish])
    status, body, seconds = await h.ask("What is 17*23?")
    assert status == 200 and seconds < 1.0
    assert json.loads(body)["text"].startswith(":hourglass_flowing_sand: Working on it")
    await eventually(lambda: len(h.fake.roots()) == 1)
    await asyncio.sleep(0.3)  # the first model stream is running now
    status, _, seconds = await h.ask("Again?", user="U2BOB")
    assert status == 200 and seconds < 1.0, "an ack must not wait for a streaming model"
    await h.settled()

    first = h.fake.roots(CHANNEL)[0]
    assert first.blocks[0]["text"]["text"] == "*<@U1ADA> asked:* What is 17*23?"
    seen = [
        message_text(Message(first.channel, first.ts, t, b, None)) for _, t, b in first.versions
    ]
    assert any(
        "*Thought:*" in s and STOP_ACTION_ID in json.dumps(b)
        for s, (_, _, b) in zip(seen, first.versions, strict=True)
    )
    assert any("*Action:* `calculate[17*23]`" in s and "calculating" in s for s in seen)
    assert any("1 · *calculate* `17*23` → 391" in s for s in seen)
    final = message_text(first)
    assert "17*23 = 391." in final and "2 steps" in final and "142 tokens" in final
    assert STOP_ACTION_ID not in json.dumps(first.blocks)

    replies = h.fake.replies(CHANNEL, first.ts)
    texts = [message_text(m) for m in replies]
    assert "*Question*" in texts[0]
    assert any("*Step 1*" in t and "calculate" in t and "391" in t for t in texts)
    assert "*Totals*" in texts[-1]
    complete = h.fake.calls("files.completeUploadExternal")
    assert complete and complete[0].args.get("thread_ts") in (first.ts, None)
    assert any(b'"question": "What is 17*23?"' in data for data in h.fake.uploads.values())
    h.model.assert_complete()


async def test_live_updates_in_one_channel_keep_the_interval(make: Any) -> None:
    h: Harness = await make(
        tool_then_answer(delay=0.02) + tool_then_answer(delay=0.02), cooldown_seconds=0
    )
    await h.ask("one")
    await h.ask("two", user="U2BOB")
    await h.settled()
    updates = [c for c in h.fake.calls("chat.update") if c.args["channel"] == CHANNEL]
    by_message: dict[str, list[float]] = {}
    for call in updates:
        by_message.setdefault(str(call.args["ts"]), []).append(call.at)
    # a run's first update and its final state go at once; every other update keeps the
    # channel's interval after whatever update came before it, of either run
    urgent = {times[0] for times in by_message.values()} | {t[-1] for t in by_message.values()}
    gaps = [b.at - a.at for a, b in itertools.pairwise(updates) if b.at not in urgent]
    assert len(gaps) >= 2
    assert min(gaps) >= INTERVAL - 0.05, gaps


async def test_finals_across_channels_go_at_once_within_the_workspace_budget(
    make: Any, fake: FakeSlack
) -> None:
    # Slack counts chat.update per workspace. Four runs in four channels with a budget of
    # eight a minute: live updates leave four for the finals of the runs still going, so
    # every final finds an update left and none waits, and Slack never answers 429.
    # (Were live updates to spend it, a final would wait for the minute to pass.)
    fake.workspace_limit("chat.update", 8)
    tool, finish = tool_then_answer(delay=0.02)
    h: Harness = await make([tool] * 4 + [finish] * 4, workspace_updates_per_minute=8)
    for n in range(4):
        await h.ask(f"question {n}", user=f"U{n}ASKER", channel=f"C{n}CHAN")
    await h.settled()
    assert fake.rate_limited == 0 and h.bot.pacer.rate_limited == 0
    finals = [m for m in fake.roots() if "17*23 = 391." in message_text(m)]
    assert len(finals) == 4
    assert h.bot.pacer.stats.waits["final"] == 0
    assert len(fake.calls("chat.update", ok=True)) <= 8


async def test_a_workspace_wide_429_holds_every_channel_and_every_final_still_arrives(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(tool_then_answer(delay=0.02) * 2)
    fake.fail("chat.update", "ratelimited", status=429, retry_after=1)
    await h.ask("one", channel="C1ONE")
    await h.ask("two", user="U2BOB", channel="C2TWO")
    await h.settled()
    assert fake.rate_limited == 1 and h.bot.pacer.rate_limited == 1
    (limited,) = [c for c in fake.records if c.status == 429]
    after = [c for c in fake.calls("chat.update", ok=True) if c.at > limited.at]
    assert after and min(c.at for c in after) - limited.at >= 1.0 - 0.05  # both channels held
    assert sum("17*23 = 391." in message_text(m) for m in fake.roots()) == 2


async def test_thread_mention_continues_the_conversation_in_the_thread(make: Any) -> None:
    h: Harness = await make(
        ["Thought: easy.\nAction: finish[It is 4.]", "Thought: yes.\nAction: finish[Then 8.]"]
    )
    await h.ask("What is 2+2?")
    await h.settled()
    root = h.root()
    mention = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": ASKER,
        "ts": "1800000000.1",
        "thread_ts": root.ts,
        "text": f"<@{BOT_USER_ID}> and doubled?",
    }
    status, _, _ = await h.event(mention, event_id="EvThread")
    assert status == 200
    await h.settled()
    in_thread = [m for m in h.fake.replies(CHANNEL, root.ts) if "Then 8." in message_text(m)]
    assert in_thread, "the follow-up is answered in the thread"
    second_prompt = h.model.calls[1].messages
    assert any(m["content"] == "It is 4." for m in second_prompt), "history of the thread is used"
    assert len(h.fake.roots(CHANNEL)) == 1


async def test_the_trace_names_the_asker_and_the_channel_as_slack_gave_them(make: Any) -> None:
    """A command carries ``user_name`` and ``channel_name``; for a mention the names come
    from ``users.info`` and ``conversations.info``, asked once each; the ids stay beside."""
    h: Harness = await make(["Thought: easy.\nAction: finish[It is 4.]"] * 3)
    await h.ask("What is 2+2?")
    await h.settled()
    trace = await h.bot.agent.traces.last(f"slack:{TEAM_ID}:{CHANNEL}:{h.root().ts}")
    assert trace is not None
    assert (trace.user, trace.user_id, trace.channel) == ("ada", ASKER, "#general")
    h.fake.users[ASKER], h.fake.channel_names[CHANNEL] = "Ada Lovelace", "general"
    for n in (1, 2):
        mention = {
            "type": "app_mention",
            "channel": CHANNEL,
            "user": ASKER,
            "ts": f"180000000{n}.1",
            "text": f"<@{BOT_USER_ID}> what is 2+2?",
        }
        assert (await h.event(mention, event_id=f"EvNamed{n}"))[0] == 200
        await h.settled()
    traces = [t for t in await h.bot.agent.traces.recent(limit=10) if t.id != trace.id]
    assert len(traces) == 2
    for named in traces:
        assert (named.user, named.user_id, named.channel) == ("Ada Lovelace", ASKER, "#general")
        assert named.conversation.startswith(f"slack:{TEAM_ID}:{CHANNEL}")
    assert len(h.fake.calls("users.info")) == 1  # remembered
    # once at the command (is the channel private? its name came with the command, the answer
    # had none yet), once for the name at the first mention; remembered after
    assert len(h.fake.calls("conversations.info")) == 2


async def test_direct_message_answered_and_bot_or_edited_messages_ignored(make: Any) -> None:
    # chat.update rendering (slack.streaming: auto streams DMs natively: test_slack_streaming)
    h: Harness = await make(["Thought: hi.\nAction: finish[Hello!]"], streaming="update")
    base = {
        "type": "message",
        "channel": "D1",
        "channel_type": "im",
        "user": ASKER,
        "ts": "5.1",
        "text": "hi",
    }
    await h.event({**base, "bot_id": "BOTHER"}, event_id="EvBot")
    await h.event({**base, "subtype": "message_changed"}, event_id="EvEdit")
    await h.event({**base, "user": BOT_USER_ID}, event_id="EvSelf")
    await h.event(base, event_id="EvDm")
    await h.settled()
    assert len(h.fake.roots("D1")) == 1 and "Hello!" in message_text(h.fake.roots("D1")[0])
    h.model.assert_complete()


async def test_starting_the_bot_logs_no_bolt_warning(
    make: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As under `reactbot serve`: the token is in the environment too, where bolt looks for
    # one of its own (issue 30: "As you gave 'client' as well, 'token' will be unused").
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    with caplog.at_level(logging.WARNING):
        h: Harness = await make(tool_then_answer())
        await h.ask("What is 17*23?")
        await h.settled()
    bolt = [r for r in caplog.records if r.name.startswith("slack_bolt")]
    assert [r.getMessage() for r in bolt if r.levelno >= logging.WARNING] == []
    assert "17*23 = 391." in message_text(h.fake.roots(CHANNEL)[0])  # and it still answers
    # only that one message is dropped: bolt's other warnings still reach the log
    logging.getLogger("slack_bolt.AsyncApp").warning("listener failed")
    assert caplog.records[-1].getMessage() == "listener failed"


# ---- delivery guarantees ------------------------------------------------------------------


async def test_a_retried_event_is_answered_once(make: Any) -> None:
    h: Harness = await make(["Thought: ok.\nAction: finish[Once.]"])
    mention = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": ASKER,
        "ts": "1.1",
        "text": f"<@{BOT_USER_ID}> hi",
    }
    first, _, _ = await h.event(mention, event_id="EvSame")
    again, _, _ = await h.event(
        mention,
        event_id="EvSame",
        **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert (first, again) == (200, 200)
    await h.settled()
    assert len(h.fake.roots(CHANNEL)) == 1
    h.model.assert_complete()


async def test_rate_limit_is_honoured_and_the_final_state_still_arrives(make: Any) -> None:
    h: Harness = await make(tool_then_answer(delay=0.02))
    h.fake.fail("chat.update", "ratelimited", status=429, retry_after=1)
    await h.ask("What is 17*23?")
    await h.settled()
    updates = h.fake.calls("chat.update")
    limited = [c for c in updates if c.status == 429]
    assert len(limited) == 1
    after = [c for c in updates if c.at > limited[0].at]
    assert after and after[0].at - limited[0].at >= 0.95, "Retry-After: 1 was not honoured"
    assert "17*23 = 391." in message_text(h.root())
    assert h.bot.pacer.rate_limited == 1


async def test_msg_too_long_is_retried_shorter(make: Any) -> None:
    h: Harness = await make(["Thought: ok.\nAction: finish[Short answer.]"])
    h.fake.fail("chat.update", "msg_too_long", times=1)
    await h.ask("q")
    await h.settled()
    failed = h.fake.calls("chat.update", ok=False)
    assert [c.error for c in failed] == ["msg_too_long"]
    assert "Short answer." in message_text(h.root())


# ---- requests that must be refused --------------------------------------------------------


async def test_bad_and_malformed_signatures_get_401(make: Any) -> None:
    h: Harness = await make([])
    body = urllib.parse.urlencode({"command": "/ask", "text": "x", "trigger_id": "t"})
    form = "application/x-www-form-urlencoded"
    cases = [
        {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "garbage"},
        {},
    ]
    for headers in cases:
        async with h.session.post(
            h.url, data=body, headers={"Content-Type": form, **headers}
        ) as response:
            assert response.status == 401, headers
    assert not h.fake.calls("chat.postMessage")


async def test_not_in_channel_tells_how_to_invite(make: Any) -> None:
    h: Harness = await make([])
    h.fake.not_joined.add("CPRIVATE")
    status, _, _ = await h.ask("hello?", channel="CPRIVATE")
    assert status == 200
    await h.settled()
    assert [body["text"] for _, body in h.fake.responses] == [INVITE]
    assert "/invite @reactbot" in INVITE


async def test_access_control_and_cooldown_answer_kindly(make: Any) -> None:
    h: Harness = await make(
        ["Thought: ok.\nAction: finish[Fine.]"],
        cooldown_seconds=30.0,
        allowed_users=frozenset({ASKER}),
    )
    _, refused, _ = await h.ask("let me in", user="UOTHER")
    assert "not on the list" in json.loads(refused)["text"]
    _, first, _ = await h.ask("one")
    _, second, _ = await h.ask("two")
    assert "Working on it" in json.loads(first)["text"]
    assert "ask again in 30 s" in json.loads(second)["text"]
    await h.settled()
    h.model.assert_complete()


# ---- final states -------------------------------------------------------------------------


async def test_model_failure_ends_in_a_visible_error_state(make: Any) -> None:
    h: Harness = await make(
        [Turn(error=ModelError("The model provider is unavailable (HTTP 503)."))]
    )
    await h.ask("q")
    await h.settled()
    final = message_text(h.root())
    assert ":x: The model provider is unavailable (HTTP 503)." in final
    assert STOP_ACTION_ID not in json.dumps(h.root().blocks)


async def test_stop_button_only_for_the_asker_or_an_admin(make: Any) -> None:
    h: Harness = await make(
        [Turn("Thought: thinking very hard about this", chunk_size=4, stall_after=3)]
    )
    await h.ask("a hard one")
    await eventually(lambda: bool(h.bot.running))
    run_id = next(iter(h.bot.running))
    await eventually(lambda: any(STOP_ACTION_ID in json.dumps(m.blocks) for m in h.fake.roots()))
    status, _, _ = await h.press_stop(run_id, user="U2BOB")
    assert status == 200
    await eventually(lambda: bool(h.fake.calls("chat.postEphemeral")))
    assert "Only <@U1ADA> or an admin" in h.fake.calls("chat.postEphemeral")[0].args["text"]
    assert h.bot.running, "a stranger's press does not stop the run"
    await h.press_stop(run_id, user=ASKER)
    await h.settled()
    assert "Stopped by <@U1ADA> after step 1." in message_text(h.root())


async def test_model_output_cannot_ping_the_channel(make: Any) -> None:
    h: Harness = await make(
        ["Thought: <!here> look <@U999>\nAction: finish[<!channel> everyone & <!everyone>]"]
    )
    await h.ask("ping?")
    await h.settled()
    assert "&lt;!channel&gt; everyone &amp; &lt;!everyone&gt;" in message_text(h.root())
    for call in h.fake.records:
        dumped = json.dumps(call.args)
        for ping in ("<!channel>", "<!here>", "<!everyone>", "<@U999>"):
            assert ping not in dumped, (call.method, ping)


MARKDOWN_ANSWER = (
    "## Which queue?\n"
    "**Redis** is *fast*; see [Verify your account](https://evil.example/login), @here.\n"
    "- small\n"
    "- simple\n"
    "\n"
    "| Name | Stars |\n"
    "|------|------:|\n"
    "| rq | 9k |\n"
    "| celery | 25k |\n"
    "\n"
    "```python\nqueue.put(<!channel>)\n```"
)


async def test_a_markdown_answer_renders_as_mrkdwn_and_stays_safe(make: Any) -> None:
    h: Harness = await make([f"Thought: I know.\nFinal Answer: {MARKDOWN_ANSWER}"])
    await h.ask("which queue?")
    await h.settled()

    root = h.root()
    answer = next(b["text"]["text"] for b in root.blocks if "Which queue" in str(b))
    assert answer.split("\n")[1:] == [
        "*Redis* is _fast_; see Verify your account (<https://evil.example/login>), @\u200bhere.",
        "• small",
        "• simple",
        "",
        "```",
        "Name   | Stars",
        "-------+------",
        "rq     | 9k",
        "celery | 25k",
        "```",
        "",
        "```",
        "queue.put(&lt;!channel&gt;)",
        "```",
    ]
    assert answer.split("\n")[0].endswith("*Which queue?*")
    for version in (root, *h.fake.replies(CHANNEL, root.ts)):
        for block in version.blocks:  # slack_sdk's own models take every block we sent
            Block.parse(block).validate_json()  # type: ignore[union-attr]
    for call in h.fake.records:
        dumped = json.dumps(call.args)
        assert "<!channel>" not in dumped and "|Verify" not in dumped


async def test_shutdown_stops_running_answers_visibly(make: Any) -> None:
    h: Harness = await make([Turn("Thought: slow", chunk_size=2, stall_after=1)])
    await h.ask("q")
    await eventually(lambda: bool(h.bot.running))
    await h.bot.aclose()
    assert h.bot.in_flight == 0
    assert "restarting" in message_text(h.root())
    _, body, _ = await h.ask("after")
    assert "restarting" in json.loads(body)["text"]


# ---- replicas sharing one Redis -------------------------------------------------------------


async def test_a_stop_pressed_on_another_replica_stops_the_run(
    make: Any, two_processes: list[RedisStores]
) -> None:
    first, second = two_processes
    runs: Harness = await make(
        [Turn("Thought: thinking very hard about this", chunk_size=4, stall_after=3)],
        stops=first.stops,
        runs=first.runs,
    )
    elsewhere: Harness = await make([], stops=second.stops, runs=second.runs)
    await runs.ask("a hard one")
    await eventually(lambda: any(STOP_ACTION_ID in json.dumps(m.blocks) for m in runs.fake.roots()))
    button = next(
        b["accessory"] for b in runs.root().blocks if b.get("accessory", {}).get("action_id")
    )
    status, _, _ = await elsewhere.press_stop(button["value"], user="U2BOB")
    assert status == 200
    await eventually(lambda: bool(runs.fake.calls("chat.postEphemeral")))
    assert "Only <@U1ADA> or an admin" in runs.fake.calls("chat.postEphemeral")[0].args["text"]
    assert runs.bot.running, "the replica that got the press refused a stranger"
    await elsewhere.press_stop(button["value"], user=ASKER)
    await eventually(lambda: not runs.bot.running, within=2.0)  # delivered, not waited out
    await runs.settled()
    assert "Stopped by <@U1ADA> after step 1." in message_text(runs.root())
    assert not elsewhere.bot.running and elsewhere.model.calls == []


async def test_replicas_share_one_cooldown(make: Any, two_processes: list[RedisStores]) -> None:
    first, second = two_processes
    one: Harness = await make(tool_then_answer(), cooldowns=first.cooldowns, cooldown_seconds=30.0)
    two: Harness = await make([], cooldowns=second.cooldowns, cooldown_seconds=30.0)
    _, body, _ = await one.ask("first")
    assert json.loads(body)["text"].startswith(":hourglass")
    _, body, _ = await two.ask("second, on another replica")
    assert "you can ask again in 30 s" in json.loads(body)["text"]
    _, body, _ = await two.ask("an admin is not held back", user="UADMIN")
    assert "ask again" not in json.loads(body)["text"]
    await one.settled()
    await two.settled()


# ---- what Slack refuses ---------------------------------------------------------------------


def is_final_edit(args: dict[str, Any]) -> bool:
    """A final-state edit: every live rendering of a run carries the Stop button."""
    return STOP_ACTION_ID not in json.dumps(args.get("blocks", []))


LONG_QUESTION = "Please explain, step by step and with care, " + "why the sky is blue " * 12


async def test_a_refused_final_edit_falls_back_to_the_compact_rendering(make: Any) -> None:
    h: Harness = await make(tool_then_answer("The sky scatters blue light."))
    h.fake.fail("chat.update", "msg_blocks_too_long", when=is_final_edit)
    await h.ask(LONG_QUESTION)
    await h.settled()
    finals = [c for c in h.fake.calls("chat.update") if is_final_edit(c.args)]
    assert [c.error for c in finals] == ["msg_blocks_too_long", None]
    refused, compact = (c.args["blocks"] for c in finals)
    assert "…" in compact[0]["text"]["text"] and "…" not in refused[0]["text"]["text"]
    root = h.root()
    assert root.blocks == compact
    assert "The sky scatters blue light." in message_text(root) and "2 steps" in message_text(root)
    assert "*Totals*" in message_text(h.fake.replies(CHANNEL, root.ts)[-1])


async def test_when_compact_is_refused_too_plain_text_arrives_and_the_run_never_looks_alive(
    make: Any,
) -> None:
    h: Harness = await make(tool_then_answer("The sky scatters blue light."))
    h.fake.fail("chat.update", "msg_blocks_too_long", when=is_final_edit)
    h.fake.fail("chat.update", "invalid_blocks", when=is_final_edit)
    await h.ask(LONG_QUESTION)
    await h.settled()
    updates = h.fake.calls("chat.update")
    first_final = next(i for i, c in enumerate(updates) if is_final_edit(c.args))
    assert [c.error for c in updates[first_final:]] == [
        "msg_blocks_too_long",
        "invalid_blocks",
        None,
    ]
    final, compact, plain = (c.args for c in updates[first_final:])
    assert "…" in compact["blocks"][0]["text"]["text"]
    assert "…" not in final["blocks"][0]["text"]["text"]
    assert len(plain["blocks"]) == 1 and "could not format this message" in plain["text"] + str(
        plain["blocks"]
    )
    root = h.root()
    assert "The sky scatters blue light." in message_text(root)
    refused_at = updates[first_final].at
    for at, text, blocks in root.versions:
        if at >= refused_at:  # nothing after the final state began looks like a running run
            assert STOP_ACTION_ID not in json.dumps(blocks)
            assert ":thinking_face:" not in text + json.dumps(blocks)
    assert STOP_ACTION_ID not in json.dumps(root.blocks)
    assert "*Totals*" in message_text(h.fake.replies(CHANNEL, root.ts)[-1])


def hostile_answer() -> str:
    parts = []
    while sum(map(len, parts)) < 50_000:
        n = len(parts)
        parts.append(f"Point {n}: {HOSTILE}see {LONG_URLS[n % 3]}?page={n} and <@U{n:06d}>.\n")
    return "".join(parts)


_ANGLED = re.compile(r"<([^<>]*)>")


async def test_a_huge_hostile_answer_is_accepted_pings_nobody_and_the_thread_is_complete(
    make: Any,
) -> None:
    answer = hostile_answer()
    assert len(answer) > 50_000
    h: Harness = await make(
        [
            Turn(f"Thought: {HOSTILE}\nAction: search[{HOSTILE}]", chunk_size=200),
            Turn(f"Thought: {HOSTILE}I have it.\nFinal Answer: {answer}", chunk_size=2000),
        ]
    )
    await h.ask(f"{HOSTILE} what is up?")
    await h.settled()

    assert [(c.method, c.error) for c in h.fake.records if c.error] == [], "all accepted"
    seen = set()
    for call in h.fake.records:
        for text in strings(call.args):
            for token in _ANGLED.findall(text):
                seen.add(token)
    # Only what the renderer writes itself: the asker's mention, our source link, labelled
    # with its host (the 2,000-character sources are named by their host, unlinked), and the
    # answer's Markdown link shown as its URL, after its text: no masked link.
    assert seen == {f"@{ASKER}", f"{escape(SHORT_URL)}|docs.example.org", "https://evil.example"}
    answers = [t for c in h.fake.records for t in strings(c.args) if "*Answer:* Point 0:" in t]
    bad = [t[:400] for t in answers if "Verify your account (<https://evil.example>)" not in t]
    assert answers and not bad, bad
    root = h.root()
    assert "continued in the thread" in message_text(root)
    replies = h.fake.replies(CHANNEL, root.ts)
    texts = [message_text(m) for m in replies]
    assert "*Question*" in texts[0] and "*Totals*" in texts[-1]
    assert any("*Step 1*" in t and "*Observation:*" in t for t in texts)
    parts = [
        b["text"]["text"].split("\n", 1)[1]
        for m in replies
        for b in m.blocks
        if b.get("text", {}).get("text", "").startswith("*Answer* (part ")
    ]
    squeeze = lambda text: re.sub(r"[\s`]", "", text)  # noqa: E731 - cuts add only these
    assert squeeze("".join(parts)) == squeeze(to_mrkdwn(answer.strip())), "the whole answer"
    uploaded = json.loads(next(iter(h.fake.uploads.values())))
    assert uploaded["answer"] == answer.strip() and uploaded["steps"][0]["sources"]
    h.model.assert_complete()


def strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in strings(value)]
    if isinstance(node, list):
        return [s for item in node for s in strings(item)]
    return []


async def test_a_wrong_bot_token_is_refused_logged_and_survived(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    h: Harness = await make(["Thought: ok.\nAction: finish[Never sent.]"], bot_token="xoxb-wrong")
    with caplog.at_level(logging.ERROR):
        status, body, _ = await h.ask("hello?")
        again, _, _ = await h.ask("still there?")
    await h.settled()
    assert (status, again) == (200, 200), "the bot answers Slack, it does not crash"
    assert "reinstall" in body  # bolt's word to the user
    assert [c.error for c in h.fake.calls("auth.test")] == ["invalid_auth", "invalid_auth"]
    assert any(
        "invalid_auth" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
    )
    assert h.fake.calls("chat.postMessage") == [] and h.model.calls == []
    async with h.session.get(h.url.replace("/slack/events", "/healthz")) as response:
        assert response.status == 200


# ---- verbosity per channel ------------------------------------------------------------------


async def settings(h: Harness, text: str, *, user: str = "UADMIN") -> str:
    """``/ask-settings text``: the ephemeral answer."""
    status, body, _ = await h.ask(text, user=user, command="/ask-settings")
    assert status == 200
    return str(json.loads(body)["text"])


async def test_compact_verbosity_shows_a_status_line_then_the_answer_and_the_thread(
    make: Any,
) -> None:
    h: Harness = await make(tool_then_answer(delay=0.02))
    assert await settings(h, "verbosity compact") == words.now_sees("*compact*")
    await h.ask("What is 17*23?")
    await h.settled()
    root = h.root()
    live = [message_text(Message(root.channel, root.ts, t, b, None)) for _, t, b in root.versions]
    assert not any("*Thought:*" in text or "*Action:*" in text for text in live[:-1]), live
    assert "17*23 = 391." in message_text(root) and "trace in thread" in message_text(root)
    assert h.fake.replies(CHANNEL, root.ts)  # the trace, as always


async def test_answer_verbosity_shows_only_the_answer_and_opens_no_thread(make: Any) -> None:
    h: Harness = await make(tool_then_answer(delay=0.02))
    await settings(h, "verbosity answer")
    await h.ask("What is 17*23?")
    await h.settled()
    root = h.root()
    final = message_text(root)
    assert "17*23 = 391." in final and "trace in thread" not in final and "steps" not in final
    assert h.fake.replies(CHANNEL, root.ts) == []
    trace = await h.bot.agent.traces.last(f"slack:{TEAM_ID}:{CHANNEL}:{root.ts}")
    assert trace is not None and trace.answer == "17*23 = 391."  # stored all the same


async def test_only_an_admin_changes_the_verbosity_and_anyone_may_read_it(make: Any) -> None:
    h: Harness = await make([])
    assert (await settings(h, "show", user=ASKER)).startswith("Verbosity: full (the default)\n")
    refused = await settings(h, "verbosity answer", user=ASKER)
    assert refused == words.ONLY_ADMINS
    assert (await settings(h, "verbosity loud")).startswith("Usage: `/ask-settings show`")
    await settings(h, "verbosity answer")
    assert (await settings(h, "", user=ASKER)).startswith("Verbosity: answer (set by an admin)")
    assert await settings(h, "verbosity default") == words.now_sees("*full (the default)*")


async def test_reset_in_a_channel_needs_an_admin_and_forgets_its_answer_threads(
    make: Any,
) -> None:
    h: Harness = await make(tool_then_answer())
    await h.ask("What is 17*23?")
    await h.settled()
    (trace,) = await h.bot.agent.traces.recent()
    assert trace.conversation == f"slack:{TEAM_ID}:{CHANNEL}:{h.root().ts}"  # its thread's
    assert await settings(h, "reset", user=ASKER) == words.RESET_ADMINS
    assert await h.bot.agent.history.load(trace.conversation)
    assert await settings(h, "reset") == words.RESET_DONE
    assert await h.bot.agent.history.load(trace.conversation) == []


async def test_a_slow_command_acks_at_once_and_answers_through_its_response_url(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("adapters.slack.commands.ACK_WITHIN", 0.0)  # as if the store lagged
    h: Harness = await make([])
    status, body, seconds = await h.ask("trace", user=ASKER, command="/ask-settings")
    assert status == 200 and seconds < 3.0 and "text" not in (body or "{}")
    await eventually(lambda: bool(h.fake.responses))
    ((_, sent),) = h.fake.responses
    assert sent["text"] == words.NO_TRACE and sent["response_type"] == "ephemeral"


# ---- a channel's model, persona and tools --------------------------------------------------


def answers(text: str, name: str) -> ScriptedModel:
    return ScriptedModel([f"Thought: I know.\nAction: finish[{text}]"], model_name=name)


async def test_an_admin_picks_the_channels_model_and_a_question_may_pick_its_own(
    make: Any,
) -> None:
    big, small = answers("from big", "big-model-v2"), answers("from small", "small-1")
    h: Harness = await make([], catalogue={"big": big, "small": small})
    assert await settings(h, "model big", user=ASKER) == (words.ONLY_ADMINS)
    assert (await settings(h, "model huge")).startswith("⚠️ There is no model named 'huge'.")
    assert await settings(h, "model big") == "This channel now uses `big`."
    await h.ask("Which model?")
    await h.settled()
    assert "from big" in message_text(h.root()) and "big-model-v2" in message_text(h.root())
    _, body, _ = await h.ask("--model nope Which?")
    assert json.loads(body)["text"].startswith("There is no model named 'nope'.")
    await h.ask("--model small Which model now?")
    await h.settled()
    assert len(big.calls) == 1 and len(small.calls) == 1
    assert small.calls[0].messages[-1]["content"].endswith("Which model now?")
    assert (await settings(h, "show", user=ASKER)).splitlines()[1] == "Model: big (set by an admin)"


async def test_an_admin_turns_a_tool_off_and_sets_a_persona_in_a_modal(make: Any) -> None:
    h: Harness = await make(["Thought: done.\nAction: finish[Arr.]"])
    assert await settings(h, "tools calculate") == "`calculate` is now off in this channel."
    assert (await settings(h, "tools", user=ASKER)) == ("Tools: search (off here: calculate)")
    status, _, _ = await h.ask("prompt", user="UADMIN", command="/ask-settings")
    assert status == 200
    view = h.fake.views[-1]
    assert view["callback_id"] == "reactbot_persona"
    submission = h.fake.submission(view, {"reactbot_input": "Talk like a pirate."}, user="UADMIN")
    body_text = urllib.parse.urlencode({"payload": json.dumps(submission)})
    status, text, _ = await h.post(body_text, "application/x-www-form-urlencoded")
    assert status == 200 and not text.strip(), "the modal closes"
    await h.ask("Who are you?")
    await h.settled()
    system = h.model.calls[0].messages[0]["content"]
    assert "- search:" in system and "- calculate:" not in system
    assert system.endswith("Talk like a pirate.\nchannel persona>>>")
    assert "channel persona" in message_text(h.root())
    trace = await h.bot.agent.traces.last(f"slack:{TEAM_ID}:{CHANNEL}:{h.root().ts}")
    assert trace is not None and trace.persona == "Talk like a pirate."
    long = h.fake.submission(view, {"reactbot_input": "x" * 1999}, user=ASKER)
    status, text, _ = await h.post(
        urllib.parse.urlencode({"payload": json.dumps(long)}), "application/x-www-form-urlencoded"
    )
    assert json.loads(text)["errors"]["reactbot_input"] == (words.ONLY_ADMINS)


# ---- daily token budgets --------------------------------------------------------------------


async def test_a_spent_token_budget_refuses_the_next_question_in_one_line(make: Any) -> None:
    # tool_then_answer reports 62 + 80 tokens: one run spends a 100-token budget
    budgets = TokenBudgets(InMemoryUsageCounters(), per_user=100)
    h: Harness = await make(tool_then_answer(), budgets=budgets)
    before = await settings(h, "usage", user=ASKER)
    assert before.startswith("You have used 0 tokens of your 100 for today.")
    await h.ask("What is 17*23?", user=ASKER)
    await h.settled()
    after = await settings(h, "usage", user=ASKER)
    assert after.startswith("You have used 142 tokens of your 100 for today."), after
    status, body, _ = await h.ask("And 2+2?", user=ASKER)
    assert status == 200
    refusal = json.loads(body)["text"]
    assert refusal.startswith("You have used your 100 tokens for today; ask again after")
    assert "00:00 UTC" in refusal
    await h.settled()
    assert len(h.model.calls) == 2, "the refused question cost no model call"


@pytest.mark.parametrize("limit", [0.0, 0.05])
async def test_usage_shows_todays_spend_in_dollars_when_the_model_has_a_price(
    make: Any, limit: float
) -> None:
    """``/ask-settings usage`` through bolt and the real client against the fake: 120 prompt
    and 22 completion tokens at $100 and $1,000 per million are $0.034; with
    ``usd_per_user_per_day`` the allowance is named beside it."""
    budgets = TokenBudgets(InMemoryUsageCounters(), usd_per_user=limit)
    h: Harness = await make(tool_then_answer(), budgets=budgets, price=Price(100.0, 1000.0))
    await h.ask("What is 17*23?", user=ASKER)
    await h.settled()
    after = await settings(h, "usage", user=ASKER)
    assert after.startswith("You have used 142 tokens today (no daily limit for you)."), after
    spent = "Spent today: $0.034 of your $0.05." if limit else "Spent today: $0.034."
    assert spent in after, after
    assert "$0.034" in message_text(h.root())  # the footer says the same cost
    unpriced: Harness = await make(
        tool_then_answer(), budgets=TokenBudgets(InMemoryUsageCounters())
    )
    await unpriced.ask("What is 17*23?", user=ASKER)
    await unpriced.settled()
    tokens_only = await settings(unpriced, "usage", user=ASKER)
    assert tokens_only.startswith("You have used 142 tokens today") and "$" not in tokens_only


async def test_a_question_asked_while_another_runs_is_told_what_the_running_one_holds(
    make: Any,
) -> None:
    """Through bolt and the real client against the fake: the asker's first question of
    the day holds everything left of their $0.05 until its real cost ($0.034) is counted, so
    a second one sent meanwhile is refused with what is left; once the first has ended, the
    $0.016 left admits the next."""
    budgets = TokenBudgets(InMemoryUsageCounters(), usd_per_user=0.05)
    turns = tool_then_answer(delay=0.05) + tool_then_answer()
    h: Harness = await make(turns, budgets=budgets, price=Price(100.0, 1000.0))
    await h.ask("What is 17*23?", user=ASKER)
    _, body, _ = await h.ask("And 2+2?", user=ASKER)  # the first one still running
    refusal = json.loads(body)["text"]
    assert refusal.startswith(
        "Your questions still running hold the $0.05 left of your $0.05 for today; "
        "ask again when they end, or after the reset at 00:00 UTC"
    ), refusal
    await h.settled()
    _, body, _ = await h.ask("And 3+3?", user=ASKER)
    assert "for today" not in body, body
    await h.settled()
    assert len(h.model.calls) == 4, "the refused question cost no model call"


async def test_admins_are_not_held_by_the_token_budget(make: Any) -> None:
    budgets = TokenBudgets(InMemoryUsageCounters(), per_user=1)
    h: Harness = await make(tool_then_answer() + tool_then_answer(), budgets=budgets)
    for _ in range(2):
        _, body, _ = await h.ask("What is 17*23?", user="UADMIN")
        assert json.loads(body)["text"] != "" and "tokens for today" not in body
        await h.settled()
    assert len(h.model.calls) == 4
    assert (await settings(h, "usage")).endswith("(Admins are not limited.)")


# ---- the workspace budget across replicas -------------------------------------------------


QUICK = Turn("Thought: easy.\nAction: finish[Done.]", usage=Usage(10, 2))


async def replicas_answer(
    make: Any, fake: FakeSlack, budgets: list[Budget | None], *, runs: int = 3
) -> None:
    """Two replicas of the bot, each answering ``runs`` quick questions in its own channels."""
    harnesses: list[Harness] = [
        await make([QUICK] * runs, update_budget=budget, workspace_updates_per_minute=4)
        for budget in budgets
    ]
    for r, h in enumerate(harnesses):
        for n in range(runs):
            await h.ask(f"question {r}.{n}", user=f"U{r}{n}ASKER", channel=f"C{r}{n}CHAN")
    for h in harnesses:
        await h.settled()


async def test_replicas_share_the_workspace_budget_through_redis(
    make: Any, fake: FakeSlack, two_processes: list[RedisStores], redis_prefix: str
) -> None:
    # Slack counts chat.update per workspace, whichever replica sends it: four in any two
    # seconds here. Two replicas with three runs each need at least six: together they wait.
    fake.workspace_limit("chat.update", 4, window=2.0)
    budgets: list[Budget | None] = [
        RedisRateBudget(stores.client, "slack:chat.update", limit=4, per=2.0, prefix=redis_prefix)
        for stores in two_processes
    ]
    await replicas_answer(make, fake, budgets)
    assert fake.rate_limited == 0
    assert sum("Done." in message_text(m) for m in fake.roots()) == 6


async def test_without_a_shared_budget_two_replicas_overspend_it(
    make: Any, fake: FakeSlack
) -> None:
    """The control: each replica alone keeps to its own four, and Slack refuses the rest."""
    fake.workspace_limit("chat.update", 4, window=2.0)
    await replicas_answer(make, fake, [LocalBudget(4, per=2.0), LocalBudget(4, per=2.0)])
    assert fake.rate_limited > 0
    assert sum("Done." in message_text(m) for m in fake.roots()) == 6  # all the same
