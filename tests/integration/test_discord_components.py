"""The components layout (``discord.layout: components``) end to end: the real discord.py
client, through the cog, against the fake Discord, which refuses a Components V2 message the
way Discord does (content beside the flag, over 40 components or 4,000 characters, malformed
containers, sections, text displays, separators). Every message is a Container; a refused
final card falls back to a smaller card, never to content; the Sources button answers
privately; approvals and Stop work from the card's ActionRow."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import json
from typing import Any

from adapters import words
from adapters.discord.layout import AMBER, BLUE, GREEN, GREY
from core.scripted import Turn
from core.tools import FunctionTool, ToolRegistry, ToolResult
from tests.fakes.discord_limits import IS_COMPONENTS_V2, components_text, invalid_form, max_length
from tests.fakes.discord_server import CHANNEL_ID, SUPPRESS_EMBEDS, Call, FakeDiscord
from tests.integration.test_discord import CALC_THEN_ANSWER, Harness, running, set_verbosity
from tests.integration.test_discord_approval import DONE, SAVE, bots
from tests.integration.test_discord_strict import SLOW_ANSWER

SOURCES = (
    "https://en.wikipedia.org/wiki/Tokyo",
    "https://www.stat.go.jp/english/@everyone](https://evil.example)",
)
SEARCH_THEN_ANSWER = [
    Turn("Thought: I will search.\nAction: search[Tokyo population]", chunk_size=8, delay=0.02),
    Turn(
        "Thought: found it.\nAction: finish[About 14 million people live in Tokyo "
        "(en.wikipedia.org, stat.go.jp).]",
        chunk_size=8,
        delay=0.02,
    ),
]


async def search(query: str) -> ToolResult:
    await asyncio.sleep(0.8)  # long enough for a live edit while it acts
    return ToolResult("1. Tokyo — Wikipedia\n2. Statistics Bureau @everyone", sources=SOURCES)


def searching() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(FunctionTool("search", search, description="web", example="search[x]"))
    return registry


def walk(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for component in components:
        found.append(component)
        found += walk(component.get("components") or [])
        if "accessory" in component:
            found += walk([component["accessory"]])
    return found


def body_of(call: Call) -> dict[str, Any]:
    body = call.json if isinstance(call.json, dict) else {}
    return body.get("data", body) if call.path.endswith("/callback") else body


def text_of(call: Call) -> str:
    return "\n".join(components_text(body_of(call).get("components") or []))


def container(call: Call) -> dict[str, Any]:
    (top,) = body_of(call)["components"]
    assert top["type"] == 17
    return dict(top)


def custom_ids(call: Call) -> list[str]:
    return [c["custom_id"] for c in walk(body_of(call).get("components") or []) if "custom_id" in c]


def is_totals(call: Call) -> bool:
    return call.method == "POST" and text_of(call).startswith("**Totals**")


async def finished(h: Harness, count: int = 1) -> None:
    await h.fake.wait_for_calls(is_totals, count, within=10)


def assert_all_cards(fake: FakeDiscord, *, besides: int | None = None) -> None:
    """Nothing refused (but a ``besides`` status); every message write a card, no content."""
    refused = [c for c in fake.calls if c.status >= 400 and c.status != besides]
    assert refused == [], refused
    for call in fake.calls:
        body = body_of(call)
        if call.method in ("POST", "PATCH") and body.get("components"):
            assert "content" not in body or not body["content"], call
            # a new card sets the flag; an edit of one may leave the flags as they are
            flags = body.get("flags")
            if call.method == "POST" or flags is not None:
                assert flags & IS_COMPONENTS_V2, call
            assert body["allowed_mentions"]["parse"] == []


async def test_a_mention_is_answered_in_cards_from_placeholder_to_thread() -> None:
    async with running(SEARCH_THEN_ANSWER, registry=searching(), layout="components") as h:
        await h.mention("how many people live in Tokyo?")
        await finished(h)
        (placeholder,) = [
            c for c in h.fake.calls_to("POST", "/messages") if "Starting" in text_of(c)
        ]
        assert container(placeholder)["accent_color"] == BLUE
        assert custom_ids(placeholder)[0].startswith("reactbot:stop:")
        reply_id = _reply(h)
        message = h.fake.messages[reply_id]
        assert message["flags"] & IS_COMPONENTS_V2 and message["content"] == ""
        edits = h.edits(reply_id)
        accents = [container(c)["accent_color"] for c in edits]
        assert AMBER in accents[:-1]  # while searching
        assert any("-# 1 · search `Tokyo population`" in text_of(c) for c in edits[:-1])
        final = edits[-1]
        assert container(final)["accent_color"] == GREEN
        texts = components_text(container(final)["components"])
        assert texts[0].startswith("About 14 million people live in Tokyo")
        assert texts[1] == "-# Sources: en.wikipedia.org · stat.go.jp"
        assert texts[2].startswith("-# ✅ 2 steps") and "trace in thread ↓" in texts[2]
        ids = custom_ids(final)
        run_id = ids[0].split(":")[2]
        votes = [f"reactbot:vote:up:{run_id}", f"reactbot:vote:down:{run_id}"]
        assert ids == [f"reactbot:sources:{run_id}", *votes]  # no Stop any more; 👍 / 👎
        (row,) = [c for c in container(final)["components"] if c["type"] == 1]
        assert [b["emoji"]["name"] for b in row["components"]] == ["👍", "👎"]
        await h.fake.dispatch("INTERACTION_CREATE", h.fake.button_press(reply_id, votes[0]))
        (thanks,) = await h.fake.wait_for_calls(lambda c: c.path.endswith("/callback"), 1)
        assert thanks.json["data"]["flags"] == 64 and "👍" in thanks.json["data"]["content"]
        trace = await h.traces.get(run_id)
        assert trace is not None and [(v.by, v.value) for v in trace.votes] == [("1001", "up")]
        posts = h.fake.calls_to("POST", f"/channels/{reply_id}/messages")
        assert text_of(posts[0]).startswith("**Question** how many people live in Tokyo?")
        assert text_of(posts[1]).startswith("**Step 1**")
        assert container(posts[1])["accent_color"] == AMBER
        files = [c for c in walk(body_of(posts[-1])["components"]) if c["type"] == 13]
        assert [f["file"]["url"] for f in files] == [f"attachment://{posts[-1].files[0]}"]
        assert_all_cards(h.fake)
        h.model.assert_complete()


async def test_the_sources_button_lists_the_links_privately_and_pings_nobody() -> None:
    async with running(SEARCH_THEN_ANSWER, registry=searching(), layout="components") as h:
        await h.mention("how many people live in Tokyo?")
        await finished(h)
        reply_id = _reply(h)
        sources = next(i for i in custom_ids(h.edits(reply_id)[-1]) if "sources" in i)
        stranger = h.fake.button_press(reply_id, sources, author_id=4444, user_name="bob")
        await h.fake.dispatch("INTERACTION_CREATE", stranger)
        reply = await h.fake.wait_for_call(lambda c: c.path.endswith("/callback"), within=5)
        data = reply.json["data"]
        assert reply.json["type"] == 4 and data["flags"] & 64  # ephemeral
        assert data["allowed_mentions"]["parse"] == []
        assert data["content"].splitlines() == [
            "**Sources**",
            "1. <https://en.wikipedia.org/wiki/Tokyo>",
            "2. <https://www.stat.go.jp/english/%40everyone%5D%28https://evil.example%29>",
        ]


async def test_slash_ask_turns_the_deferred_response_into_a_card() -> None:
    async with running(CALC_THEN_ANSWER, layout="components") as h:
        payload = h.fake.interaction_create("ask", {"question": "what is 17*23+4?"})
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await finished(h)
        assert h.fake.calls_to("POST", "/callback")[0].json["type"] == 5  # deferred
        originals = h.fake.calls_to("PATCH", "/messages/@original")
        assert text_of(originals[0]) == "⏳ Starting…" and "content" not in originals[0].json
        assert originals[0].json["flags"] & IS_COMPONENTS_V2
        assert text_of(originals[-1]).startswith("17*23+4 = 395")
        # the card keeps SUPPRESS_EMBEDS through the webhook's edits (they send no flags)
        original = h.fake.original_response(payload["token"])
        assert h.fake.messages[original]["flags"] == IS_COMPONENTS_V2 | SUPPRESS_EMBEDS
        assert all("flags" not in c.json for c in originals[1:])
        assert_all_cards(h.fake)


async def test_a_refused_final_card_falls_back_to_a_smaller_card_never_to_content() -> None:
    fake = FakeDiscord()
    fake.refuse_next(
        "PATCH",
        "/messages/",
        invalid_form({"components": {"_errors": [max_length(4000)]}}),
        when=lambda body: (
            "17*23+4 = 395" in json.dumps(body) and "trace in thread" in json.dumps(body)
        ),
    )
    async with running(CALC_THEN_ANSWER, fake=fake, layout="components") as h:
        await h.mention("what is 17*23+4?")
        await finished(h)
        reply_id = _reply(h)
        final = h.edits(reply_id)[-1]
        assert text_of(final).startswith("17*23+4 = 395")
        assert "content" not in final.json and final.json["flags"] & IS_COMPONENTS_V2
        posts = h.fake.calls_to("POST", f"/channels/{reply_id}/messages")
        assert text_of(posts[0]).startswith("**Answer** (in full)")  # the thread has it whole


async def test_compact_verbosity_keeps_one_status_line_in_the_card() -> None:
    async with running(CALC_THEN_ANSWER, layout="components") as h:
        await set_verbosity(h, "compact")
        await h.mention("what is 17*23+4?")
        await finished(h)
        edits = h.edits(_reply(h))
        live = [components_text(container(c)["components"]) for c in edits[:-1]]
        assert live and all(len(texts) == 1 and "\n" not in texts[0] for texts in live), live
        assert text_of(edits[-1]).startswith("17*23+4 = 395")


def _reply(h: Harness) -> int:
    return next(
        mid
        for mid, m in h.fake.messages.items()
        if m["flags"] & IS_COMPONENTS_V2 and int(m["channel_id"]) == CHANNEL_ID
    )


async def test_approve_from_the_cards_action_row_and_the_step_says_who() -> None:
    async with bots([[SAVE, DONE]], layout="components") as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note: buy milk"))
        pending = await b.fake.wait_for_call(
            lambda c: c.method == "PATCH" and "reactbot:decide:" in json.dumps(c.json), within=5
        )
        message_id = int(pending.path.rsplit("/", 1)[1])
        assert container(pending)["accent_color"] == AMBER
        text = text_of(pending)
        assert "✋ Waiting for approval" in text and "**Action** `save_note`" in text
        ids = {i.split(":")[5]: i for i in custom_ids(pending) if i.startswith("reactbot:decide:")}
        assert set(ids) == {"approve", "edit", "deny", "always"}
        assert custom_ids(pending)[-1].startswith("reactbot:stop:")
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, ids["approve"]))
        await b.fake.wait_for_call(is_totals, within=10)
        assert b.processes[0].ran == ["buy milk"]
        final = b.fake.calls_to("PATCH", f"/messages/{message_id}")[-1]
        assert "reactbot:decide:" not in json.dumps(final.json)
        assert container(final)["accent_color"] == GREEN
        thread = [text_of(c) for c in b.fake.calls if c.method == "POST"]
        assert any("-# ✅ approved by ada" in t for t in thread)
        assert_all_cards(b.fake)


async def test_stop_from_the_card_ends_it_grey() -> None:
    async with bots([[SAVE, DONE]], layout="components") as b:
        await b.send(0, "MESSAGE_CREATE", b.fake.message_create("save a note"))
        pending = await b.fake.wait_for_call(
            lambda c: c.method == "PATCH" and "reactbot:decide:" in json.dumps(c.json), within=5
        )
        message_id = int(pending.path.rsplit("/", 1)[1])
        stop = next(i for i in custom_ids(pending) if i.startswith("reactbot:stop:"))
        await b.send(0, "INTERACTION_CREATE", b.fake.button_press(message_id, stop))
        await b.fake.wait_for_call(is_totals, within=10)
        final = b.fake.calls_to("PATCH", f"/messages/{message_id}")[-1]
        assert container(final)["accent_color"] == GREY
        assert text_of(final).startswith("⏹️ Stopped by ada")
        await asyncio.sleep(0)
        assert_all_cards(b.fake)


async def test_a_card_outliving_its_interaction_token_goes_on_with_the_bot_token() -> None:
    fake = FakeDiscord(interaction_token_ttl=0.5)
    async with running([SLOW_ANSWER], fake=fake, layout="components") as h:
        payload = h.fake.interaction_create("ask", {"question": "what is 17*23+4?"})
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await finished(h)
        webhook = h.fake.calls_to("PATCH", "/messages/@original")
        assert [c.status for c in webhook if c.status != 200] == [401]  # switched once
        original = h.fake.original_response(payload["token"])
        channel_route = [c for c in h.edits(original) if c.path.startswith("/channels/")]
        # the flags edit keeps the card's flag beside SUPPRESS_EMBEDS (it cannot be removed)
        assert channel_route[0].json == {"tts": False, "flags": IS_COMPONENTS_V2 | SUPPRESS_EMBEDS}
        by_bot = [c for c in channel_route if "components" in c.json]
        assert len(by_bot) >= 2 and by_bot[0].at > webhook[-1].at
        assert text_of(by_bot[-1]).startswith("It is 395.")
        assert container(by_bot[-1])["accent_color"] == GREEN
        assert h.fake.messages[original]["flags"] == IS_COMPONENTS_V2 | SUPPRESS_EMBEDS
        assert_all_cards(h.fake, besides=401)


# ---- /trace ---------------------------------------------------------------------------------

HOSTILE_QUESTION = "what is 17*23+4? @everyone ```py\nunclosed [x](https://evil.example)"


async def trace_reply(h: Harness) -> Call:
    payload = h.fake.interaction_create("trace")
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    token = payload["token"]
    return await h.fake.wait_for_call(
        lambda c: c.method == "POST" and c.path.endswith(f"/{token}") and c.status == 200
    )


async def test_slash_trace_is_a_card_with_the_question_the_numbers_and_the_files() -> None:
    async with running(CALC_THEN_ANSWER, layout="components") as h:
        await h.mention(HOSTILE_QUESTION)
        await finished(h)
        trace = await h.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None
        call = await trace_reply(h)
        body = body_of(call)
        assert body["flags"] & IS_COMPONENTS_V2 and body["flags"] & SUPPRESS_EMBEDS
        assert not body.get("content") and body["allowed_mentions"]["parse"] == []
        assert container(call)["accent_color"] == GREEN
        question, numbers = components_text(body["components"])[:2]
        assert question.startswith("**Question** what is 17*23+4?")
        assert "@everyone" not in question and "](https://" not in question  # inert
        assert numbers.startswith("-# 2 steps") and "540 tokens" in numbers
        named = [c["file"]["url"] for c in walk(body["components"]) if c["type"] == 13]
        assert named == [f"attachment://trace-{trace.id}.md", f"attachment://trace-{trace.id}.json"]
        assert call.files == (f"trace-{trace.id}.md", f"trace-{trace.id}.json")
        assert_all_cards(h.fake)


async def test_slash_trace_in_the_text_layout_puts_the_numbers_above_the_question() -> None:
    async with running(CALC_THEN_ANSWER, layout="text") as h:
        await h.mention(HOSTILE_QUESTION)
        await h.finished()
        call = await trace_reply(h)
        body = body_of(call)
        numbers, question = body["content"].split("\n", 1)
        assert numbers.startswith("-# 2 steps")  # before the question's open ``` fence
        assert question.startswith("**Question** what is 17*23+4?")
        assert body["content"].count("```") % 2 == 0  # the fence is closed
        assert body["allowed_mentions"]["parse"] == [] and body["flags"] & SUPPRESS_EMBEDS
        assert len(call.files) == 2


async def test_slash_trace_without_a_run_says_there_is_none_yet() -> None:
    async with running([], layout="components") as h:
        call = await trace_reply(h)
        assert body_of(call)["content"] == words.NO_TRACE
