"""The bot against a Discord that refuses and disconnects: the real discord.py client over
real HTTP and websocket to the strict fake (``tests/fakes/discord_server.py``), with the
harness of ``test_discord.py``. Whatever Discord refuses or drops, every run must still end in
its final state, and every question must be answered exactly once."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord

import asyncio
import io
import logging
from pathlib import Path
from typing import Any

import pytest
from discord.http import Route

from adapters.discord.client import create_bot
from adapters.discord.cog import Services
from adapters.discord.settings import DiscordSettings
from bot.cli import run_cli
from core.agent import Agent
from core.history import InMemoryHistoryStore
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryTraceStore
from tests.fakes.discord_limits import invalid_form, max_length
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.integration.test_discord import Harness, content_of, running, tools
from tests.stores import in_memory_stores
from tests.surfaces.policy import policy

SLOW_ANSWER = Turn(
    "Thought: " + "let me think this through " * 12 + "\nAction: finish[It is 395.]",
    chunk_size=8,
    delay=0.03,
)
"""One step of about a second, so something can happen to the connection while it runs."""
QUICK_ANSWER = Turn("Thought: easy.\nAction: finish[Hello, bob.]")


def placeholders(h: Harness) -> list[object]:
    return [c for c in h.fake.calls_to("POST", "/messages") if "Starting" in content_of(c)]


def final_edits(h: Harness, prefix: str) -> list[object]:
    return [
        c
        for c in h.fake.calls_to("PATCH", "/messages/")
        if c.status == 200 and content_of(c).startswith(prefix)
    ]


async def a_run_is_editing(h: Harness) -> None:
    await h.fake.wait_for_call(lambda c: c.method == "PATCH" and "Thinking" in content_of(c))


# ---- gateway ------------------------------------------------------------------------------


async def test_reconnect_mid_run_resumes_replays_and_answers_each_question_once() -> None:
    async with running([SLOW_ANSWER, QUICK_ANSWER]) as h:
        await h.mention("what is 17*23+4?")
        await a_run_is_editing(h)
        await h.fake.reconnect_request()
        # Sent on the socket the client is leaving: it never reads it, so only the RESUME
        # replay can deliver it.
        await h.mention("say hi to bob", author_id=1002, name="bob")
        await h.finished(2)
        assert [path for path, _ in h.fake.resumes] == ["/resume-gateway"]
        assert h.fake.identifies == 1
        assert len(final_edits(h, "It is 395.")) == 1
        assert len(final_edits(h, "Hello, bob.")) == 1
        await h.settled()
        assert len(placeholders(h)) == 2
        h.model.assert_complete()


async def test_a_resumable_invalid_session_resumes_and_the_run_ends_once() -> None:
    async with running([SLOW_ANSWER]) as h:
        await h.mention("what is 17*23+4?")
        await a_run_is_editing(h)
        await h.fake.invalidate_session(resumable=True)
        await h.finished()
        assert len(h.fake.resumes) == 1 and h.fake.identifies == 1
        assert len(final_edits(h, "It is 395.")) == 1
        await h.settled()
        assert len(placeholders(h)) == 1
        h.model.assert_complete()


async def test_an_invalid_session_identifies_anew_and_the_run_ends_once() -> None:
    # discord.py waits before every IDENTIFY but the first (before_identify_hook, 5 s by
    # default: Discord allows max_concurrency IDENTIFYs per 5 s). The fake enforces that
    # spacing; both are shortened here to keep the test fast, the hook through its public
    # override.
    fake = FakeDiscord(identify_interval=0.3)
    async with running([SLOW_ANSWER, QUICK_ANSWER], fake=fake) as h:
        waits: list[bool] = []

        async def before_identify_hook(shard_id: int | None, *, initial: bool = False) -> None:
            waits.append(initial)
            await asyncio.sleep(0.35)

        h.bot.before_identify_hook = before_identify_hook  # type: ignore[method-assign]
        await h.mention("what is 17*23+4?")
        await a_run_is_editing(h)
        identified = h.fake.identifies
        await h.fake.invalidate_session(resumable=False)
        async with asyncio.timeout(5):
            while h.fake.identifies == identified:  # noqa: ASYNC110 - the fake's counter
                await asyncio.sleep(0.01)
        assert waits == [False] and h.fake.resumes == []
        await h.mention("say hi to bob", author_id=1002, name="bob")
        await h.finished(2)
        assert len(final_edits(h, "It is 395.")) == 1
        assert len(final_edits(h, "Hello, bob.")) == 1
        await h.settled()
        assert len(placeholders(h)) == 2
        h.model.assert_complete()


# ---- REST refusals ------------------------------------------------------------------------


async def test_a_wrong_token_fails_login_with_a_clear_error_and_nothing_else_is_tried() -> None:
    fake = FakeDiscord()
    await fake.start()
    saved = Route.BASE
    history, traces = InMemoryHistoryStore(), InMemoryTraceStore()
    agent = Agent(ScriptedModel([]), tools(), history=history, traces=traces, locks=InMemoryLocks())
    settings = DiscordSettings(api_base_url=fake.api_base_url, guild_ready_timeout=0.05)
    bot = create_bot(
        Services(
            agent, in_memory_stores(history=history, traces=traces), settings, policy("discord")
        )
    )
    try:
        with pytest.raises(discord.LoginFailure, match="Improper token has been passed"):
            await bot.start("not-the-bot-token")
    finally:
        await bot.close()
        await fake.stop()
    assert [(c.method, c.path, c.status) for c in fake.calls] == [("GET", "/users/@me", 401)]
    assert fake.identifies == 0
    assert saved == Route.BASE  # the endpoints it replaced are restored


async def test_serve_reports_a_wrong_token_in_one_line_without_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeDiscord()
    await fake.start()
    try:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"discord:\n  api_base_url: {fake.api_base_url}\nops:\n  enabled: false\n"
        )
        token = "wrong-discord-token-never-printed"
        out = io.StringIO()
        async with asyncio.timeout(30):
            code = await run_cli(
                ["--config", str(config), "serve"], env={"DISCORD_TOKEN": token}, stdout=out
            )
    finally:
        await fake.stop()
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if "discord: stopped" in line]
    assert lines == ["discord: stopped: LoginFailure: Improper token has been passed."]
    assert token not in err + out.getvalue() and "Traceback" not in err


async def test_a_global_429_mid_run_still_ends_in_the_final_state() -> None:
    async with running([SLOW_ANSWER]) as h:
        await h.mention("what is 17*23+4?")
        await a_run_is_editing(h)
        h.fake.rate_limit_global(0.6)
        await h.finished()
        limited = [c for c in h.fake.calls if c.status == 429]
        assert h.fake.globally_limited >= 1 and limited
        final = final_edits(h, "It is 395.")
        assert len(final) == 1 and final[0].at >= h.fake.global_limit_ends
        assert h.bot.watch.hits >= 1
        h.model.assert_complete()


async def test_the_channel_bucket_headers_keep_the_bot_under_the_limit_without_a_429() -> None:
    # The placeholder and edits every 0.25 s make 4 writes in 0.6 s; the bucket allows 3. The
    # headers tell discord.py when the bucket is empty, and it waits for the reset itself.
    fake = FakeDiscord(channel_limit=(3, 0.6))
    async with running([SLOW_ANSWER], fake=fake) as h:
        await h.mention("what is 17*23+4?")
        await h.finished()
        assert h.fake.rate_limited == 0 and h.bot.watch.hits == 0
        writes = [c for c in h.fake.calls if c.path.startswith(f"/channels/{CHANNEL_ID}/")]
        assert len(writes) > 3 and all(c.status == 200 for c in writes)
        assert len(final_edits(h, "It is 395.")) == 1


async def test_a_run_outliving_its_interaction_token_goes_on_with_the_bot_token() -> None:
    fake = FakeDiscord(interaction_token_ttl=0.5)
    async with running([SLOW_ANSWER], fake=fake) as h:
        payload = h.fake.interaction_create("ask", {"question": "what is 17*23+4?"})
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.finished()
        webhook = h.fake.calls_to("PATCH", "/messages/@original")
        assert [c.status for c in webhook if c.status != 200] == [401]  # switched once
        original = h.fake.original_response(payload["token"])
        channel_route = [c for c in h.edits(original) if c.path.startswith("/channels/")]
        # the first one only sets SUPPRESS_EMBEDS (the webhook route cannot); content follows
        assert channel_route[0].json == {"tts": False, "flags": 4}
        assert h.fake.messages[original]["flags"] & 4
        by_bot = [c for c in channel_route if "content" in c.json]
        assert by_bot and by_bot[0].at > webhook[-1].at
        assert content_of(by_bot[-1]).startswith("It is 395.\n-# ✅")
        assert no_stop(by_bot[-1].json)
        assert len(by_bot) >= 2  # live edits went on, not only the final one
        (thread,) = h.fake.calls_to("POST", f"/messages/{original}/threads")
        assert thread.status == 200
        assert content_of(h.fake.calls_to("POST", f"/channels/{original}/messages")[-1]).startswith(
            "**Totals**"
        )


async def test_a_refused_thread_attaches_the_trace_to_a_reply() -> None:
    async with running([QUICK_ANSWER]) as h:
        h.fake.refuse_threads()
        await h.mention("say hi to bob")
        attached = await h.fake.wait_for_call(lambda c: "trace is attached" in content_of(c))
        assert attached.status == 200
        (reply_id,) = [m for m, data in h.fake.messages.items() if "Hello, bob." in data["content"]]
        assert attached.path == f"/channels/{CHANNEL_ID}/messages"
        assert attached.json["message_reference"]["message_id"] == reply_id
        assert [name.rsplit(".", 1)[1] for name in attached.files] == ["md", "json"]
        assert [c.status for c in h.fake.calls_to("POST", "/threads")] == [403]


async def test_a_refused_final_edit_sends_the_compact_form() -> None:
    answer = "\n".join(f"Line {i}: " + "words " * 12 for i in range(20))  # ~1.7k characters
    turn = Turn(f"Thought: long.\nAction: finish[{answer}]", chunk_size=200)
    async with running([turn]) as h:
        refusal = invalid_form({"content": {"_errors": [max_length(2000)]}})
        h.fake.refuse_next("PATCH", "/messages/", refusal, when=lambda b: "✅" in b["content"])
        await h.mention("write a lot")
        await h.finished()
        finals = [c for c in h.fake.calls_to("PATCH", "/messages/") if "✅" in content_of(c)]
        assert [c.status for c in finals] == [400, 200]
        full, compact = (content_of(c) for c in finals)
        assert len(full) > 1000 >= len(compact)
        assert compact.startswith("Line 0:") and "goes on in the thread" in compact
        assert no_stop(finals[1].json)
        # nothing of the answer is lost: the thread starts with all of it
        thread = [content_of(c) for c in h.fake.calls if c.path.endswith("/messages")]
        whole = next(i for i, text in enumerate(thread) if text.startswith("**Answer** (in full)"))
        assert "".join(thread[whole : whole + 2]).count("words") == answer.count("words")


async def test_one_refused_thread_post_leaves_a_note_and_the_rest_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running([QUICK_ANSWER]) as h:
        refusal = invalid_form({"content": {"_errors": [max_length(2000)]}})
        h.fake.refuse_next(
            "POST",
            "/messages",
            refusal,
            when=lambda b: str(b.get("content")).startswith("**Step 1**"),
        )
        with caplog.at_level(logging.WARNING, logger="adapters.discord.surface"):
            await h.mention("say hi to bob")
            await h.finished()
        (thread,) = h.fake.calls_to("POST", "/threads")
        thread_id = thread.path.split("/")[4]  # a thread on a message has the message's id
        posts = h.fake.calls_to("POST", f"/channels/{thread_id}/messages")
        assert [(content_of(c)[:10], c.status) for c in posts] == [
            ("**Question", 200),
            ("**Step 1**", 400),
            ("-# (Discor", 200),
            ("**Totals**", 200),
        ]
        assert any("refused post 2 of 3" in r.getMessage() for r in caplog.records)


# ---- pacing against Discord's buckets (5 message writes per 5 s per channel) ----------------

DISCORD_BUCKET = (5, 5.0)


def final_delays(h: Harness) -> list[float]:
    """Per run, from its final event to Discord receiving the final edit (when people see
    it; discord.py may return later, holding the request that spent a bucket until it resets)."""
    delays = []
    for live in h.lives:
        message_id = live.surface.message.id  # type: ignore[attr-defined]
        edits = [c for c in h.fake.calls_to("PATCH", f"/messages/{message_id}") if c.status == 200]
        assert live.stats.final_at is not None and edits
        delays.append(edits[-1].at - live.stats.final_at)
    return sorted(delays)


async def test_a_final_right_after_live_updates_goes_at_once_from_the_kept_edit() -> None:
    # The placeholder, the first update and two live ones spend four of the channel's five
    # writes in the first second; live updates then stop, and the final takes the fifth.
    fake = FakeDiscord(channel_limit=DISCORD_BUCKET)
    async with running([SLOW_ANSWER], fake=fake) as h:
        await h.mention("what is 17*23+4?")
        await h.finished()
        assert h.fake.rate_limited == 0 and h.bot.watch.hits == 0
        assert len(final_edits(h, "It is 395.")) == 1
        (delay,) = final_delays(h)
        assert delay < 1.0  # the bucket resets 5 s after the placeholder: the final did not wait
        assert h.bot.cog is not None
        assert h.bot.cog.pacer.stats.waits["final"] == 0  # the bucket held an edit for it
        assert h.bot.cog.pacer.stats.waits["live"] >= 1  # live updates gave way


async def test_many_channels_at_once_each_final_goes_without_waiting_and_without_a_429() -> None:
    fake = FakeDiscord(channel_limit=DISCORD_BUCKET)
    channels = [CHANNEL_ID + 1 + i for i in range(20)]
    for channel in channels:
        fake.add_channel(channel)
    async with running([QUICK_ANSWER] * len(channels), fake=fake) as h:
        for n, channel in enumerate(channels):
            await h.mention("hi", channel_id=channel, author_id=2000 + n)
        await h.finished(len(channels))
        assert h.fake.rate_limited == 0 and h.bot.watch.hits == 0
        assert len(final_edits(h, "Hello, bob.")) == len(channels)
        assert h.bot.cog is not None and h.bot.cog.pacer.stats.waits["final"] == 0


async def test_a_burst_of_finals_in_one_channel_stays_inside_the_bucket() -> None:
    # Four quick runs in one channel: four placeholders and four first updates and four finals
    # are twelve writes for a bucket of five: finals go while it has an edit, then wait for
    # the reset that the headers announce, and Discord never answers 429.
    fake = FakeDiscord(channel_limit=(5, 1.0))
    async with running([QUICK_ANSWER] * 4, fake=fake) as h:
        for n in range(4):
            await h.mention("hi", author_id=3000 + n)
        await h.finished(4)
        assert h.fake.rate_limited == 0 and h.bot.watch.hits == 0
        assert len(final_edits(h, "Hello, bob.")) == 4


async def test_a_429_in_the_middle_of_a_burst_holds_that_channel_only() -> None:
    fake = FakeDiscord(channel_limit=DISCORD_BUCKET)
    other = CHANNEL_ID + 100
    fake.add_channel(other)
    async with running([SLOW_ANSWER, SLOW_ANSWER], fake=fake) as h:
        await h.mention("what is 17*23+4?")
        await h.mention("and again?", channel_id=other, author_id=4000)
        await a_run_is_editing(h)
        h.fake.rate_limit_next("PATCH", f"/channels/{CHANNEL_ID}/messages/", retry_after=0.6)
        await h.finished(2)
        assert len(final_edits(h, "It is 395.")) == 2
        limited = [c for c in h.fake.calls if c.status == 429]
        assert len(limited) == 1 and h.bot.watch.hits == 1
        later = [
            c
            for c in h.fake.calls_to("PATCH", f"/channels/{CHANNEL_ID}/messages/")
            if c.at > limited[0].at and c.status == 200
        ]
        assert later and later[0].at - limited[0].at >= 0.6 - 0.05  # its channel waited
        elsewhere = [
            c
            for c in h.fake.calls_to("PATCH", f"/channels/{other}/messages/")
            if limited[0].at < c.at < limited[0].at + 0.5
        ]
        assert elsewhere  # the other channel went on editing meanwhile


async def test_writes_the_bot_did_not_pace_count_too_so_live_updates_leave_the_final_its_edit() -> (
    None
):
    # Two runs in one channel: two placeholders and two first updates leave one write of five.
    # The pacer hears of the placeholders from the bucket's headers, so no live update takes
    # that write (discord.py would then hold the finals behind it until the bucket resets).
    fake = FakeDiscord(channel_limit=DISCORD_BUCKET)
    async with running([SLOW_ANSWER, SLOW_ANSWER], fake=fake) as h:
        await h.mention("what is 17*23+4?")
        await h.mention("and again?", author_id=5000)
        await h.finished(2, within=20)
        assert h.fake.rate_limited == 0
        delays = final_delays(h)
        assert len(delays) == 2
        assert delays[0] < 1.0, delays  # the first final took the kept write (the bucket: 5 s)
        # The second waited for the bucket (no 429: it knew). How long is left of the bucket's
        # 5 s when that run ends depends on the machine's pace: sent at once would be < 0.1 s.
        assert delays[1] > 0.25, delays


def no_stop(body: dict[str, Any]) -> bool:
    """A finished answer's buttons: 👍 / 👎, no Stop."""
    ids = [b["custom_id"] for row in body["components"] for b in row["components"]]
    return [i.split(":")[2] for i in ids] == ["up", "down"]
