"""The real discord.py client against the local fake Discord (REST + gateway over real HTTP).

A scripted model drives the agent; events are injected as raw gateway payloads; assertions
read the REST calls the fake recorded, with their times.
"""

from __future__ import annotations

import warnings

# discord.py 2.7 imports the deprecated audioop module; the suite turns warnings into errors.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from adapters import words
from adapters.channels import ChannelChoices
from adapters.discord.client import ReactBot, create_bot
from adapters.discord.cog import Live, Services
from adapters.discord.settings import DiscordSettings
from adapters.room import Room
from core.agent import Agent
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.errors import ModelUnavailable
from core.history import InMemoryHistoryStore
from core.llm import ChatModel, Usage
from core.pricing import Price
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryTraceStore, RunRegistry
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.discord_server import CHANNEL_ID, ROLE_ID, Call, FakeDiscord
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

INTERVAL = 0.25
TOLERANCE = 0.05

CALC_THEN_ANSWER = [
    Turn(
        "Thought: This is arithmetic; I will use the calculator.\nAction: calculate[17*23+4]",
        chunk_size=6,
        delay=0.03,
        usage=Usage(500, 40),
    ),
    Turn("Thought: I have the result.\nAction: finish[17*23+4 = 395]", chunk_size=6, delay=0.03),
]


@dataclass
class Harness:
    fake: FakeDiscord
    bot: ReactBot
    model: ScriptedModel
    history: InMemoryHistoryStore
    traces: InMemoryTraceStore
    lives: list[Live] = field(default_factory=list)

    async def mention(self, text: str, **kw: object) -> dict[str, object]:
        payload = self.fake.message_create(text, **kw)  # type: ignore[arg-type]
        await self.fake.dispatch("MESSAGE_CREATE", payload)
        return payload

    async def finished(self, count: int = 1, *, within: float = 10.0) -> None:
        """Wait until ``count`` runs posted their trace totals."""
        await self.fake.wait_for_calls(_is_totals, count, within=within)

    async def settled(self, *, within: float = 10.0) -> None:
        """Wait until every run the bot started has ended, its thread and counts included."""
        assert self.bot.cog is not None
        async with asyncio.timeout(within):
            await self.bot.cog.settled()

    def edits(self, message_id: object) -> list[Call]:
        return [
            c for c in self.fake.calls_to("PATCH", f"/messages/{message_id}") if c.status == 200
        ]

    def placeholder(self) -> Call:
        return next(
            c for c in self.fake.calls_to("POST", "/messages") if "Starting" in content_of(c)
        )


def content_of(call: Call) -> str:
    return str(call.json.get("content") or "") if isinstance(call.json, dict) else ""


def _is_totals(call: Call) -> bool:
    return call.method == "POST" and content_of(call).startswith("**Totals**")


async def calculate(arg: str) -> str:
    return "395"


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(FunctionTool("calculate", calculate, description="math", example="calculate[1+1]"))
    return registry


@contextlib.asynccontextmanager
async def running(
    turns: list[Turn | str],
    *,
    fake: FakeDiscord | None = None,
    budgets: TokenBudgets | None = None,
    catalogue: dict[str, ChatModel] | None = None,
    registry: ToolRegistry | None = None,
    runs: RunRegistry | None = None,
    room: Room | None = None,
    prices: dict[str, Price] | None = None,
    **settings: object,
) -> AsyncIterator[Harness]:
    """The bot against ``fake`` (a default FakeDiscord unless given, not yet started), with
    ``registry``'s tools (else the calculator)."""
    fake = fake or FakeDiscord()
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    model = ScriptedModel(list(turns))
    history, traces = InMemoryHistoryStore(), InMemoryTraceStore()
    agent = Agent(
        model,
        registry or tools(),
        history=history,
        traces=traces,
        locks=InMemoryLocks(),
        prices=prices,
    )
    base = DiscordSettings(
        api_base_url=fake.api_base_url,
        edit_interval=INTERVAL,
        tick=INTERVAL,
        guild_ready_timeout=0.05,
        layout="text",  # the components layout: test_discord_components.py
    )
    own, policy = split("discord", **{"cooldown_seconds": 0, **settings})
    harness_lives: list[Live] = []
    services = Services(
        agent,
        in_memory_stores(history=history, traces=traces, runs=runs),
        replace(base, **own),
        policy,
        on_live=harness_lives.append,
        room=room,
    )
    if budgets is not None:
        services.budgets = budgets
    services.choices = ChannelChoices(
        services.stores.channel_settings, catalogue or {}, agent.tools
    )
    bot = create_bot(services)
    task = asyncio.create_task(bot.start("fake-token"))
    try:
        async with asyncio.timeout(10):
            await fake.identified.wait()  # login ran, so wait_until_ready may be called
            await bot.wait_until_ready()
        yield Harness(fake, bot, model, history, traces, harness_lives)
    finally:
        await bot.close()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await fake.stop()


def gaps(calls: list[Call]) -> list[float]:
    return [b.at - a.at for a, b in itertools.pairwise(calls)]


def button_ids(body: dict[str, Any]) -> list[str]:
    return [b["custom_id"] for row in body.get("components") or [] for b in row["components"]]


def vote_ids(h: Harness) -> list[str]:
    """The 👍 / 👎 buttons a finished answer carries, named by its run."""
    run_id = next(i for i in button_ids(h.placeholder().json) if "stop" in i).split(":")[2]
    return [f"reactbot:vote:up:{run_id}", f"reactbot:vote:down:{run_id}"]


def all_sent(fake: FakeDiscord) -> list[Call]:
    return [c for c in fake.calls if c.method in ("POST", "PATCH") and "content" in (c.json or {})]


# ---- tests ----------------------------------------------------------------------------------


async def test_mention_gets_placeholder_paced_edits_answer_and_trace_thread() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        asked = await h.mention("what is 17*23+4?")
        await h.finished()
        first = h.placeholder()
        assert first.json["message_reference"]["message_id"] == int(str(asked["id"]))
        assert first.json["components"][0]["components"][0]["label"] == "Stop"
        reply_id = h.fake.messages and next(
            mid for mid, m in h.fake.messages.items() if "trace in thread" in m["content"]
        )
        edits = h.edits(reply_id)
        assert len(edits) >= 3
        # live updates keep the channel's spacing; the final state does not wait for it
        assert min(gaps(edits[:-1])) >= INTERVAL - TOLERANCE
        assert "Thinking · step 1/8" in edits[0].json["content"]
        final = edits[-1].json
        assert final["content"].startswith("17*23+4 = 395\n-# ✅ 2 steps")
        assert "540 tokens · text mode · `scripted` · trace in thread ↓" in final["content"]
        assert button_ids(final) == vote_ids(h)  # Stop is gone; 👍 / 👎 came
        (thread,) = h.fake.calls_to("POST", f"/messages/{reply_id}/threads")
        assert thread.json["name"] == "Trace: what is 17*23+4?"
        posts = h.fake.calls_to("POST", f"/channels/{reply_id}/messages")
        contents = [p.json["content"] for p in posts]
        assert contents[0].startswith("**Question** what is 17*23+4?")
        assert contents[1].startswith("**Step 1**") and "`calculate` `17*23+4`" in contents[1]
        assert contents[-1].startswith("**Totals** ✅ answered")
        assert posts[-1].files[0].endswith(".json")
        h.model.assert_complete()
        assert await h.history.load(f"discord:{CHANNEL_ID}")


async def test_anyone_votes_on_an_answer_once_each_and_trace_show_has_it() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        await h.mention("what is 17*23+4?")
        await h.finished()
        reply_id = next(m for m, v in h.fake.messages.items() if "trace in thread" in v["content"])
        (row,) = h.fake.messages[reply_id]["components"]
        assert [b["emoji"]["name"] for b in row["components"]] == ["👍", "👎"]
        up, down = vote_ids(h)
        presses = [(up, 1001, "ada"), (down, 2002, "mallory"), (down, 1001, "ada")]
        for custom_id, author, name in presses:
            press = h.fake.button_press(reply_id, custom_id, author_id=author, user_name=name)
            await h.fake.dispatch("INTERACTION_CREATE", press)
        answers = await h.fake.wait_for_calls(lambda c: c.path.endswith("/callback"), 3)
        for answer in answers:
            assert answer.json["type"] == 4 and answer.json["data"]["flags"] == 64  # private
        assert [a.json["data"]["content"].split()[2] for a in answers] == ["👍", "👎", "👎"]
        trace = await h.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None
        assert [(v.by, v.value) for v in trace.votes] == [("2002", "down"), ("1001", "down")]
        assert "**Feedback:** 👍 0 · 👎 2 (2002 👎, 1001 👎)" in trace.to_markdown()
        # Nothing about the message changed: a vote is not an edit.
        assert h.fake.calls_to("PATCH", f"/messages/{reply_id}")[-1].json["components"] == [row]


async def test_everything_is_sent_with_mentions_disabled() -> None:
    turns = [
        Turn(
            "Thought: ping them @everyone <@&123456789012345678>\nAction: finish[@everyone hi <@&123456789012345678>]"
        )
    ]
    async with running(turns) as h:
        await h.mention("say hi to everyone")
        await h.finished()
        sent = all_sent(h.fake)
        assert sent
        for call in sent:
            assert call.json["allowed_mentions"]["parse"] == [], call
            assert "@everyone" not in str(call.json.get("content", ""))
            assert "<@&1234" not in str(call.json.get("content", ""))


async def test_a_429_postpones_the_next_edit_and_the_final_state_still_arrives() -> None:
    slow = [
        Turn(
            "Thought: " + "thinking hard " * 30 + "\nAction: finish[done]", chunk_size=4, delay=0.02
        )
    ]
    async with running(slow) as h:
        h.fake.rate_limit_next("PATCH", "/messages/", count=1, retry_after=0.6)
        await h.mention("think")
        await h.finished()
        patches = h.fake.calls_to("PATCH", "/messages/")
        limited = next(i for i, c in enumerate(patches) if c.status == 429)
        after = patches[limited + 1]
        assert after.status == 200
        assert after.at - patches[limited].at >= 0.6 - TOLERANCE
        assert patches[-1].json["content"].startswith("done\n-# ✅")
        assert h.bot.watch.hits == 1
        assert h.bot.cog is not None and h.bot.cog.pacer.rate_limited == 1


async def test_a_long_answer_is_split_with_the_rest_in_the_thread() -> None:
    answer = "\n".join(f"Paragraph {i}: " + "words " * 20 for i in range(40))
    async with running([Turn(f"Thought: long.\nAction: finish[{answer}]", chunk_size=400)]) as h:
        await h.mention("write a lot")
        await h.finished()
        final = h.fake.calls_to("PATCH", "/messages/")[-1].json["content"]
        assert len(final) <= 2000
        assert "the answer goes on in the thread" in final
        thread_posts = [
            c.json["content"]
            for c in h.fake.calls_to("POST", "/messages")
            if c.path.count("/") == 3
        ]
        rest = thread_posts[1]  # [0] is the placeholder in the channel
        assert rest.startswith("Paragraph") and not rest.startswith("**Question**")
        assert "Paragraph 39" in "".join(thread_posts)


async def test_a_failing_model_ends_in_the_error_state() -> None:
    failing = [Turn(error=ModelUnavailable("The model service is unavailable (503)."))]
    async with running(failing) as h:
        await h.mention("anything")
        await h.finished()
        final = h.fake.calls_to("PATCH", "/messages/")[-1].json
        assert final["content"].startswith("❌ The model service is unavailable (503).")
        assert final["components"] == []


async def test_stop_only_by_the_asker_and_the_trace_records_who() -> None:
    stalling = [
        Turn("Thought: let me think about this for a long time", chunk_size=5, stall_after=3)
    ]
    async with running(stalling) as h:
        await h.mention("a long question")
        reply = await h.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        custom_id = reply.json["components"][0]["components"][0]["custom_id"]
        reply_id = h.fake.created[0]
        await h.fake.dispatch(
            "INTERACTION_CREATE",
            h.fake.button_press(reply_id, custom_id, author_id=2002, user_name="mallory"),
        )
        refusal = await h.fake.wait_for_call(lambda c: "/callback" in c.path)
        assert refusal.json["data"]["flags"] == 64  # ephemeral
        assert refusal.json["data"]["content"] == words.stop_refused("<@1001>")  # no ping
        await h.fake.dispatch("INTERACTION_CREATE", h.fake.button_press(reply_id, custom_id))
        await h.finished()
        final = h.edits(reply_id)[-1].json["content"]
        assert final.startswith("⏹️ Stopped by ada after step 1.")
        trace = await h.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None and trace.stopped_by == "ada" and trace.status == "cancelled"
        assert trace.stopped_by_id == "1001"  # beside the display name, which anyone may change


async def test_an_admin_may_stop_someone_elses_run() -> None:
    stalling = [Turn("Thought: slow", chunk_size=2, stall_after=2)]
    async with running(stalling, admin_roles=(ROLE_ID,)) as h:
        await h.mention("q")
        reply = await h.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        custom_id = reply.json["components"][0]["components"][0]["custom_id"]
        reply_id = h.fake.created[0]
        press = h.fake.button_press(
            reply_id, custom_id, author_id=3003, user_name="mod", roles=(ROLE_ID,)
        )
        await h.fake.dispatch("INTERACTION_CREATE", press)
        await h.finished()
        assert h.edits(reply_id)[-1].json["content"].startswith("⏹️ Stopped by mod")


async def test_an_unauthorized_user_is_refused_and_nothing_runs() -> None:
    async with running([], allowed_users=(5,)) as h:
        asked = await h.mention("let me in")
        reply = await h.fake.wait_for_call(lambda c: c.method == "POST" and "/messages" in c.path)
        assert "not on the list" in reply.json["content"]
        assert reply.json["message_reference"]["message_id"] == int(str(asked["id"]))
        await h.settled()
        assert h.model.calls == []


async def test_cooldown_answers_kindly() -> None:
    async with running(CALC_THEN_ANSWER, cooldown_seconds=60) as h:
        await h.mention("first")
        await h.mention("second")
        note = await h.fake.wait_for_call(lambda c: "One moment" in content_of(c))
        assert "you can ask again in" in note.json["content"]
        await h.finished()


async def test_admins_are_not_held_by_the_cooldown_as_on_every_surface() -> None:
    async with running(CALC_THEN_ANSWER * 2, cooldown_seconds=60, admin_roles=(ROLE_ID,)) as h:
        await h.mention("first", roles=(ROLE_ID,))
        await h.mention("second", roles=(ROLE_ID,))
        await h.finished(2)
        assert not [c for c in h.fake.calls if "One moment" in content_of(c)]
        h.model.assert_complete()


async def test_a_replayed_event_is_answered_once_and_bots_are_ignored() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        payload = await h.mention("what is 17*23+4?")
        await h.fake.dispatch("MESSAGE_CREATE", payload)  # a reconnect replays it
        await h.mention("from a bot", author_id=4004, bot=True)
        await h.finished()
        await h.settled()
        placeholders = [
            c for c in h.fake.calls_to("POST", "/messages") if "Starting" in content_of(c)
        ]
        assert len(placeholders) == 1
        h.model.assert_complete()


async def test_slash_ask_defers_then_edits_the_original_response() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        payload = h.fake.interaction_create("ask", {"question": "what is 17*23+4?"})
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.finished()
        callback = h.fake.calls_to("POST", "/callback")[0]
        assert callback.json["type"] == 5  # deferred: "reactbot is thinking..."
        originals = h.fake.calls_to("PATCH", "/messages/@original")
        assert originals[0].json["content"] == "⏳ Starting…"
        assert originals[-1].json["content"].startswith("17*23+4 = 395")
        live = [c for c in originals if c.status == 200][1:-1]  # the final does not wait
        assert min(gaps(live)) >= INTERVAL - TOLERANCE
        assert h.fake.calls_to("POST", "/threads")


async def test_slash_reset_clears_the_channel_history() -> None:
    async with running([]) as h:
        await h.history.append(f"discord:{CHANNEL_ID}", {"role": "user", "content": "old"})
        anyone = h.fake.interaction_create("reset")  # a channel is shared: admins only
        h.fake.remember_interaction(anyone)
        await h.fake.dispatch("INTERACTION_CREATE", anyone)
        refused = await h.fake.wait_for_call(lambda c: words.RESET_ADMINS in str(c.json))
        assert refused.json["type"] == 4 and refused.json["data"]["flags"] == 64  # at once
        assert await h.history.load(f"discord:{CHANNEL_ID}") != []
        payload = h.fake.interaction_create("reset", roles=(ROLE_ID,))
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.fake.wait_for_call(lambda c: "forgot" in content_of(c))
        assert await h.history.load(f"discord:{CHANNEL_ID}") == []
        await h.fake.dispatch("INTERACTION_CREATE", payload)  # delivered again: said nothing
        after = h.fake.interaction_create("reactbot", subcommand="usage")
        h.fake.remember_interaction(after)
        await h.fake.dispatch("INTERACTION_CREATE", after)  # handled after the repeat
        await h.fake.wait_for_call(lambda c: f"/interactions/{after['id']}/" in c.path)
        answered = [c for c in h.fake.calls if f"/interactions/{payload['id']}/" in c.path]
        assert [c.json["type"] for c in answered] == [5], "one defer, then the follow-up"


# ---- verbosity per channel ------------------------------------------------------------------


async def set_verbosity(h: Harness, level: str, *, roles: tuple[int, ...] = (ROLE_ID,)) -> str:
    """``/reactbot verbosity level`` by an admin (or, without the role, by anyone); the reply."""
    payload = h.fake.interaction_create(
        "reactbot", {"level": level}, subcommand="verbosity", roles=roles
    )
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    call = await h.fake.wait_for_call(
        lambda c: (
            c.path.endswith("/callback")
            and c.json.get("data", {}).get("content")
            and f"/interactions/{payload['id']}/" in c.path
        )
    )
    return str(call.json["data"]["content"])


async def test_compact_verbosity_shows_one_status_line_then_the_answer_and_the_thread() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        assert "now see: **compact**" in await set_verbosity(h, "compact")
        await h.mention("what is 17*23+4?")
        await h.finished()
        reply_id = next(mid for mid, m in h.fake.messages.items() if "395" in m["content"])
        edits = h.edits(reply_id)
        live = [content_of(c) for c in edits[:-1]]
        assert live and all("\n" not in text for text in live), live  # one line each
        assert any("Running" in text or "Thinking" in text for text in live)
        assert not any("**Thought**" in text for text in live)
        assert content_of(edits[-1]).startswith("17*23+4 = 395\n-# ✅ 2 steps")
        assert h.fake.calls_to("POST", f"/messages/{reply_id}/threads")  # the trace, as always


async def test_answer_verbosity_shows_only_the_answer_and_opens_no_thread() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        await set_verbosity(h, "answer")
        await h.mention("what is 17*23+4?")
        await h.fake.wait_for_call(lambda c: content_of(c) == "17*23+4 = 395")
        await h.settled()  # the run is over: a thread, had it one, was opened before this
        assert not h.fake.calls_to("POST", "/threads")
        trace = await h.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None and trace.answer == "17*23+4 = 395"  # still stored
        live = [content_of(c) for c in h.fake.calls_to("PATCH", "/messages/")][:-1]
        assert all(text.startswith("⏳ Working on it") for text in live), live


async def test_only_an_admin_changes_the_verbosity_and_settings_shows_it() -> None:
    async with running([]) as h:
        refused = await set_verbosity(h, "answer", roles=())
        assert refused == words.ONLY_ADMINS
        payload = h.fake.interaction_create("reactbot", subcommand="settings")
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        shown = await h.fake.wait_for_call(lambda c: "Verbosity" in str(c.json))
        assert "full (the default)" in str(shown.json)
        assert await set_verbosity(h, "default") == words.now_sees("**full (the default)**")


# ---- daily token budgets --------------------------------------------------------------------


async def usage_reply(h: Harness) -> str:
    payload = h.fake.interaction_create("reactbot", subcommand="usage")
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    call = await h.fake.wait_for_call(
        lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
    )
    assert call.json["data"]["flags"] & 64, "ephemeral"
    return str(call.json["data"]["content"])


async def test_a_spent_token_budget_refuses_the_next_mention_in_one_line() -> None:
    budgets = TokenBudgets(InMemoryUsageCounters(), per_user=500)
    async with running(CALC_THEN_ANSWER, budgets=budgets) as h:
        assert (await usage_reply(h)).startswith("You have used 0 tokens of your 500 for today.")
        await h.mention("what is 17*23+4?")
        await h.finished()
        await h.settled()  # the run counted: its tokens are settled after its last post
        assert (await usage_reply(h)).startswith("You have used 540 tokens of your 500")
        await h.mention("and 2+2?")
        refusal = await h.fake.wait_for_call(lambda c: "tokens for today" in content_of(c))
        assert content_of(refusal).startswith(
            "You have used your 500 tokens for today; ask again after the reset at 00:00 UTC"
        )
        assert refusal.json["allowed_mentions"]["parse"] == []
        assert len(h.model.calls) == 2, "the refused question cost no model call"


async def test_usage_shows_todays_spend_in_dollars_when_the_model_has_a_price() -> None:
    """``/reactbot usage`` through discord.py against the fake: 500 prompt and 40 completion
    tokens at $10 and $100 per million are $0.009, of a $0.01 daily allowance."""
    budgets = TokenBudgets(InMemoryUsageCounters(), usd_per_user=0.01)
    price = {"scripted": Price(input=10.0, output=100.0)}
    async with running(CALC_THEN_ANSWER, budgets=budgets, prices=price) as h:
        before = await usage_reply(h)
        assert "You have used 0 tokens today (no daily limit for you)." in before
        assert "Spent today: $0 of your $0.01." in before
        await h.mention("what is 17*23+4?")
        await h.finished()
        await h.settled()
        after = await usage_reply(h)
        assert after.startswith("You have used 540 tokens today (no daily limit for you).")
        assert "Spent today: $0.009 of your $0.01." in after, after
        footer = h.fake.calls_to("PATCH", "/messages/")[-1].json["content"]
        assert "540 tokens · $0.009" in footer, footer


async def test_usage_shows_tokens_only_when_the_model_has_no_price() -> None:
    async with running(CALC_THEN_ANSWER, budgets=TokenBudgets(InMemoryUsageCounters())) as h:
        await h.mention("what is 17*23+4?")
        await h.finished()
        await h.settled()
        after = await usage_reply(h)
        assert after.startswith("You have used 540 tokens today") and "$" not in after, after


# ---- a channel's model, persona and tools --------------------------------------------------


async def reactbot_command(
    h: Harness, subcommand: str, options: dict[str, str] | None = None, *, admin: bool = True
) -> dict[str, Any]:
    """``/reactbot subcommand`` (by an admin unless ``admin`` is off): the callback's JSON."""
    payload = h.fake.interaction_create(
        "reactbot", options, subcommand=subcommand, roles=(ROLE_ID,) if admin else ()
    )
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    call = await h.fake.wait_for_call(
        lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
    )
    return dict(call.json)


def finishing(text: str, name: str) -> ScriptedModel:
    return ScriptedModel([f"Thought: I know.\nAction: finish[{text}]"], model_name=name)


async def test_an_admin_sets_the_channels_model_persona_and_tools() -> None:
    big = finishing("from big", "big-model-v2")
    async with running(
        ["Thought: ok.\nAction: finish[from default]"],
        catalogue={"big": big},
        admin_roles=(ROLE_ID,),
    ) as h:
        refused = await reactbot_command(h, "model", {"name": "big"}, admin=False)
        assert refused["data"]["content"] == words.ONLY_ADMINS
        unknown = await reactbot_command(h, "model", {"name": "huge"})
        assert unknown["data"]["content"].startswith("⚠️ There is no model named 'huge'.")
        done = await reactbot_command(h, "model", {"name": "big"})
        assert done["data"]["content"] == "This channel now uses `big`."
        off = await reactbot_command(h, "tools", {"tool": "calculate"})
        assert off["data"]["content"] == "`calculate` is now off in this channel."
        form = await reactbot_command(h, "prompt")
        assert form["type"] == 9 and form["data"]["custom_id"] == "reactbot:persona"
        submit = h.fake.modal_submit(
            "reactbot:persona", {"persona": "Answer in French."}, roles=(ROLE_ID,)
        )
        h.fake.remember_interaction(submit)
        await h.fake.dispatch("INTERACTION_CREATE", submit)
        await h.fake.wait_for_call(lambda c: "persona is set" in str(c.json))
        shown = await reactbot_command(h, "settings", admin=False)
        lines = shown["data"]["content"].splitlines()
        assert lines[1:] == [
            "Model: big (set by an admin)",
            "Tools: none (off here: calculate)",
            "Persona: 17 characters",
        ]
        await h.mention("which model?")
        await h.finished()
        assert len(big.calls) == 1 and h.model.calls == [], "the channel's model answered"
        system = big.calls[0].messages[0]["content"]
        assert "- calculate:" not in system and "Answer in French." in system
        final = next(m for m in h.fake.messages.values() if "from big" in m["content"])
        assert "`big-model-v2`" in final["content"] and "channel persona" in final["content"]


async def test_an_unknown_model_asked_for_is_quoted_inert() -> None:
    async with running([], catalogue={"big": finishing("x", "big")}) as h:
        hostile = "[Verify your account](https://evil.example) @everyone"
        payload = h.fake.interaction_create("ask", {"question": "hi", "model": hostile})
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        call = await h.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
        )
        text = call.json["data"]["content"]
        assert text.startswith("There is no model named") and "Models: `big`" in text
        assert "](" not in text and "@everyone" not in text  # no masked link, no ping
        assert call.json["data"]["allowed_mentions"]["parse"] == []
        assert h.model.calls == []


async def test_the_trace_names_the_asker_and_the_channel_and_keeps_the_ids() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        await h.mention("what is 17*23+4?", name="Ada Lovelace", author_id=1001)
        await h.finished()
        trace = await h.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None
        assert (trace.user, trace.user_id) == ("Ada Lovelace", "1001")
        assert trace.channel == f"#channel-{CHANNEL_ID}"
        assert trace.conversation == f"discord:{CHANNEL_ID}"
