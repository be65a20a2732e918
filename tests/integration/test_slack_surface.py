"""SlackSurface against the strict fake over HTTP, through the real AsyncWebClient: each kind of
refusal maps to what LiveMessage needs (retry, wait, drop, or EditRejected), and a refused
trace post is shortened, sent as plain text, or skipped without ending the thread."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.live import EditDeferred, EditRejected, RateLimited
from adapters.slack.blocks import SlackMessage, context, section
from adapters.slack.surface import NotInChannel, SlackSurface, post_root
from core.trace import Trace
from tests.fakes.slack_server import TOKEN, FakeSlack, message_text

CHANNEL = "C1"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def client(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    async with aiohttp.ClientSession() as session:
        yield AsyncWebClient(token=TOKEN, base_url=fake.base_url, session=session)


@pytest.fixture
async def surface(client: AsyncWebClient) -> SlackSurface:
    posted = await client.chat_postMessage(channel=CHANNEL, text="placeholder")
    return SlackSurface(client, channel=CHANNEL, ts=str(posted["ts"]), upload_trace_json=False)


def message(text: str = "hello", *, blocks: int = 1) -> SlackMessage:
    return SlackMessage(text, tuple(section(f"{text} {i}") for i in range(blocks)))


# ---- chat.update --------------------------------------------------------------------------


async def test_a_payload_slack_refuses_is_edit_rejected(
    surface: SlackSurface, fake: FakeSlack
) -> None:
    with pytest.raises(EditRejected, match="invalid_blocks"):
        await surface.edit(message(blocks=51))  # a real refusal: more than 50 blocks
    for error in ("msg_blocks_too_long", "invalid_arguments", "invalid_blocks_format"):
        fake.fail("chat.update", error)
        with pytest.raises(EditRejected, match=error):
            await surface.edit(message())
    assert [c.error for c in fake.calls("chat.update")] == [
        "invalid_blocks",
        "msg_blocks_too_long",
        "invalid_arguments",
        "invalid_blocks_format",
    ]


async def test_msg_too_long_is_shortened_then_rejected_once_shortening_is_exhausted(
    surface: SlackSurface, fake: FakeSlack
) -> None:
    long = SlackMessage("x" * 200, (section("y" * 2000),))
    fake.fail("chat.update", "msg_too_long")
    await surface.edit(long)
    sent = fake.calls("chat.update")
    assert [c.error for c in sent] == ["msg_too_long", None]
    assert len(sent[1].args["blocks"][0]["text"]["text"]) < 2000
    fake.fail("chat.update", "msg_too_long", times=SlackSurface.MAX_SHORTENINGS + 1)
    with pytest.raises(EditRejected, match="msg_too_long"):
        await surface.edit(long)
    assert len(fake.calls("chat.update")) == 2 + SlackSurface.MAX_SHORTENINGS + 1


async def test_a_gone_message_or_a_refused_token_is_logged_and_dropped(
    surface: SlackSurface, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    for error in ("message_not_found", "channel_not_found", "is_archived", "edit_window_closed"):
        fake.fail("chat.update", error)
        await surface.edit(message())
    fake.fail("chat.update", "invalid_auth")
    with caplog.at_level(logging.WARNING, logger="adapters.slack.surface"):
        await surface.edit(message())
    assert surface.dropped_edits == 5
    assert any(r.levelno == logging.ERROR and "invalid_auth" in r.message for r in caplog.records)


async def test_rate_limits_and_slack_side_errors_wait(
    surface: SlackSurface, fake: FakeSlack
) -> None:
    fake.fail("chat.update", "ratelimited", status=429, retry_after=7)
    with pytest.raises(RateLimited) as limited:
        await surface.edit(message())
    assert limited.value.retry_after == 7 and limited.value.shared
    for error, status in (("internal_error", 200), ("fatal_error", 200), ("", 503)):
        fake.fail("chat.update", error, status=status)
        with pytest.raises(EditDeferred) as deferred:
            await surface.edit(message())
        assert not isinstance(deferred.value, RateLimited)


# ---- trace posts --------------------------------------------------------------------------


def posts(n: int) -> list[SlackMessage]:
    return [
        SlackMessage(f"post {i}", (section(f"*Step {i}* " + "z" * 1500), context(f"c{i}")))
        for i in range(n)
    ]


async def test_a_refused_trace_post_is_shortened_then_plain_and_the_thread_goes_on(
    surface: SlackSurface, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    def step(n: int) -> Any:
        return lambda args: f"*Step {n}*" in str(args.get("blocks") or args.get("text"))

    tries = SlackSurface.MAX_SHORTENINGS + 1
    fake.fail("chat.postMessage", "msg_blocks_too_long", when=step(0))  # shortened once
    fake.fail("chat.postMessage", "invalid_blocks", times=tries, when=step(1))  # plain text
    fake.fail("chat.postMessage", "msg_too_long", times=tries + 1, when=step(2))  # skipped
    with caplog.at_level(logging.ERROR, logger="adapters.slack.surface"):
        await surface.post_trace(Trace(question="q"), posts(4))
    replies = fake.replies(CHANNEL, surface.ts)
    assert len(replies) == 3
    assert "*Step 0*" in message_text(replies[0]) and len(replies[0].blocks) == 2
    assert replies[0].blocks[0]["text"]["text"].endswith("…")
    assert replies[1].blocks == [] and replies[1].text.startswith("*Step 1* zzz")
    assert "c1" in replies[1].text
    assert "*Step 3*" in message_text(replies[2])
    assert any("refused even as plain text" in r.message for r in caplog.records)


async def test_an_invalid_argument_goes_straight_to_plain_text(
    surface: SlackSurface, fake: FakeSlack
) -> None:
    fake.fail("chat.postMessage", "invalid_arguments")
    await surface.post_trace(Trace(question="q"), posts(1))
    assert [c.error for c in fake.calls("chat.postMessage")[1:]] == ["invalid_arguments", None]
    assert fake.replies(CHANNEL, surface.ts)[0].blocks == []


async def test_a_gone_channel_ends_the_thread(surface: SlackSurface, fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", "channel_not_found")
    await surface.post_trace(Trace(question="q"), posts(3))
    assert len(fake.calls("chat.postMessage")) == 2  # the placeholder and the refused post
    assert fake.replies(CHANNEL, surface.ts) == []


async def test_a_refused_upload_is_said_in_the_thread(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="placeholder")
    surface = SlackSurface(client, channel=CHANNEL, ts=str(posted["ts"]))
    fake.fail("files.completeUploadExternal", "missing_scope")
    trace = Trace(question="q")
    await surface.post_trace(trace, [])
    note = message_text(fake.replies(CHANNEL, surface.ts)[-1])
    assert "could not be attached" in note and f"reactbot trace show {trace.id}" in note


async def test_an_upload_url_that_refuses_is_said_in_the_thread_too(
    client: AsyncWebClient, fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slack_sdk raises SlackRequestError (not SlackApiError) when the upload URL refuses.
    real = fake._m_files_getUploadURLExternal

    def declare_less(args: dict[str, Any]) -> dict[str, Any]:
        return real({**args, "length": int(args["length"]) - 1})

    monkeypatch.setattr(fake, "_m_files_getUploadURLExternal", declare_less)
    posted = await client.chat_postMessage(channel=CHANNEL, text="placeholder")
    surface = SlackSurface(client, channel=CHANNEL, ts=str(posted["ts"]))
    await surface.post_trace(Trace(question="q"), [])
    assert "could not be attached" in message_text(fake.replies(CHANNEL, surface.ts)[-1])
    assert fake.uploads == {}


# ---- the placeholder ------------------------------------------------------------------------


async def test_a_refused_placeholder_is_posted_as_its_text_alone(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    ts = await post_root(client, channel=CHANNEL, thread_ts=None, message=message(blocks=51))
    assert [c.error for c in fake.calls("chat.postMessage")] == ["invalid_blocks", None]
    assert fake.messages[ts].text == "hello" and fake.messages[ts].blocks == []
    fake.not_joined.add("CNOT")
    with pytest.raises(NotInChannel):
        await post_root(client, channel="CNOT", thread_ts=None, message=message())
