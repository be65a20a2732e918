"""The fake's agent streaming and assistant methods refuse what Slack refuses, the way Slack
refuses it (``{"ok": false, "error": ...}``), through the real ``AsyncWebClient`` over HTTP;
each limit is pinned at its boundary too, so the fake does not over-refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_server import STREAM_MARKDOWN, TASK_FIELD, TEAM_ID, TOKEN, FakeSlack

DM = "D1"
CHANNEL = "C1"
THREAD = "1700000000.000001"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def client(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    async with aiohttp.ClientSession() as session:
        yield AsyncWebClient(token=TOKEN, base_url=fake.base_url, session=session)


def task(**fields: Any) -> dict[str, Any]:
    return {"type": "task_update", "id": "t1", "title": "search: x", "status": "pending", **fields}


async def refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as info:
        await call
    data: dict[str, Any] = info.value.response.data  # type: ignore[assignment]
    assert data["ok"] is False
    return data


async def start(client: AsyncWebClient, channel: str = DM, **extra: Any) -> str:
    response = await client.chat_startStream(
        channel=channel, thread_ts=THREAD, task_display_mode="plan", **extra
    )
    return str(response["ts"])


async def test_a_whole_stream_is_kept_as_a_reader_would_see_it(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    ts = await start(client, chunks=[{"type": "plan_update", "title": "Plan: q"}])
    await client.chat_appendStream(channel=DM, ts=ts, chunks=[task(status="in_progress")])
    await client.chat_appendStream(
        channel=DM,
        ts=ts,
        chunks=[
            task(
                status="complete",
                details="d" * TASK_FIELD,
                output="o" * TASK_FIELD,
                sources=[{"type": "url", "url": "https://a.example/", "text": "a.example"}],
            )
        ],
    )
    await client.chat_appendStream(channel=DM, ts=ts, markdown_text="x" * STREAM_MARKDOWN)
    await client.chat_stopStream(channel=DM, ts=ts, markdown_text="!")
    stream = fake.streams[ts]
    assert stream.plan_title == "Plan: q" and stream.tasks["t1"]["status"] == "complete"
    assert [u["status"] for u in stream.task_updates] == ["in_progress", "complete"]
    assert stream.markdown == "x" * STREAM_MARKDOWN + "!" and not stream.streaming


async def test_channels_need_the_recipient_fields(client: AsyncWebClient) -> None:
    assert (await refusal(start(client, CHANNEL)))["error"] == "missing_recipient_user_id"
    no_team = start(client, CHANNEL, recipient_user_id="U1")
    assert (await refusal(no_team))["error"] == "missing_recipient_team_id"
    await start(client, CHANNEL, recipient_user_id="U1", recipient_team_id=TEAM_ID)
    await start(client, DM)  # a DM needs neither


async def test_markdown_text_and_chunks_never_in_one_call(client: AsyncWebClient) -> None:
    ts = await start(client)
    both = client.chat_appendStream(
        channel=DM, ts=ts, markdown_text="a", chunks=[{"type": "markdown_text", "text": "b"}]
    )
    data = await refusal(both)
    assert data["error"] == "invalid_arguments"
    assert "markdown_text and chunks cannot be used together" in data["errors"]


async def test_markdown_text_is_at_most_12000_characters(client: AsyncWebClient) -> None:
    ts = await start(client)
    long = client.chat_appendStream(channel=DM, ts=ts, markdown_text="x" * (STREAM_MARKDOWN + 1))
    assert (await refusal(long))["error"] == "invalid_arguments"
    chunk = [{"type": "markdown_text", "text": "x" * (STREAM_MARKDOWN + 1)}]
    assert (await refusal(client.chat_appendStream(channel=DM, ts=ts, chunks=chunk)))[
        "error"
    ] == "invalid_chunks"


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (task(status="done"), "must be a valid enum value [json-pointer:/chunks/0/status]"),
        (task(title="t" * (TASK_FIELD + 1)), "must be less than 257 characters"),
        (task(details="d" * (TASK_FIELD + 1)), "[json-pointer:/chunks/0/details]"),
        (task(output="o" * (TASK_FIELD + 1)), "[json-pointer:/chunks/0/output]"),
        (task(title=""), "must be more than 0 characters"),
        ({"type": "task_update", "id": "t", "status": "pending"}, "missing required field: title"),
        (task(colour="red"), "invalid additional property: colour"),
        (task(sources=[{"type": "url", "url": "https://x"}]), "missing required field: text"),
        ({"type": "thinking", "text": "x"}, "failed to match all allowed schemas"),
        ({"type": "plan_update", "title": "p" * (TASK_FIELD + 1)}, "must be less than 257"),
    ],
)
async def test_chunks_are_checked_like_slack_checks_them(
    client: AsyncWebClient, chunk: dict[str, Any], expected: str
) -> None:
    ts = await start(client)
    data = await refusal(client.chat_appendStream(channel=DM, ts=ts, chunks=[chunk]))
    assert data["error"] == "invalid_chunks"
    assert any(expected in line for line in data["errors"]), data["errors"]


async def test_every_task_status_is_accepted(client: AsyncWebClient) -> None:
    ts = await start(client)
    for status in ("pending", "in_progress", "complete", "error"):
        await client.chat_appendStream(channel=DM, ts=ts, chunks=[task(status=status)])


async def test_a_stopped_or_closed_stream_is_not_in_streaming_state(
    client: AsyncWebClient, fake: FakeSlack
) -> None:
    ts = await start(client)
    await client.chat_stopStream(channel=DM, ts=ts)
    after = client.chat_appendStream(channel=DM, ts=ts, markdown_text="late")
    assert (await refusal(after))["error"] == "message_not_in_streaming_state"
    again = client.chat_stopStream(channel=DM, ts=ts)
    assert (await refusal(again))["error"] == "message_not_in_streaming_state"
    fake.stream_max_chars = 10
    other = await start(client)
    await client.chat_appendStream(channel=DM, ts=other, markdown_text="x" * 10)
    too_long = client.chat_appendStream(channel=DM, ts=other, markdown_text="y")
    assert (await refusal(too_long))["error"] == "message_not_in_streaming_state"
    assert fake.streams[other].stopped_by_slack


async def test_feedback_buttons_at_stop_are_checked(client: AsyncWebClient) -> None:
    good = {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": "f",
                "positive_button": {"text": {"type": "plain_text", "text": "👍"}, "value": "up"},
                "negative_button": {"text": {"type": "plain_text", "text": "👎"}, "value": "dn"},
            }
        ],
    }
    ts = await start(client)
    await client.chat_stopStream(channel=DM, ts=ts, blocks=[good])
    bad = {**good, "elements": [{**good["elements"][0], "negative_button": None}]}
    ts = await start(client)
    data = await refusal(client.chat_stopStream(channel=DM, ts=ts, blocks=[bad]))
    assert data["error"] == "invalid_blocks"


async def test_errors_have_slacks_shapes(client: AsyncWebClient, fake: FakeSlack) -> None:
    fake.no_streaming.add("D9")
    assert (await refusal(start(client, "D9")))["error"] == "channel_type_not_supported"
    ts = await start(client)
    unknown = client.chat_appendStream(channel=DM, ts="1.2", markdown_text="x")
    assert (await refusal(unknown))["error"] == "message_not_found"
    empty = client.chat_appendStream(channel=DM, ts=ts)
    assert (await refusal(empty))["error"] == "no_text"
    fake.fail("chat.appendStream", "ratelimited", status=429, retry_after=3)
    with pytest.raises(SlackApiError) as info:
        await AsyncWebClient(
            token=TOKEN, base_url=fake.base_url, retry_handlers=[]
        ).chat_appendStream(channel=DM, ts=ts, markdown_text="x")
    assert info.value.response.status_code == 429
    assert info.value.response.headers.get("Retry-After") == "3"
    bad_token = AsyncWebClient(token="xoxb-wrong", base_url=fake.base_url)
    assert (await refusal(bad_token.chat_startStream(channel=DM, thread_ts=THREAD)))[
        "error"
    ] == "invalid_auth"


async def test_assistant_threads_methods(client: AsyncWebClient, fake: FakeSlack) -> None:
    await client.assistant_threads_setSuggestedPrompts(
        channel_id=DM, thread_ts=THREAD, prompts=[{"title": "t", "message": "m"}] * 4
    )
    five = client.assistant_threads_setSuggestedPrompts(
        channel_id=DM, thread_ts=THREAD, prompts=[{"title": "t", "message": "m"}] * 5
    )
    assert (await refusal(five))["error"] == "invalid_arguments"
    await client.assistant_threads_setStatus(
        channel_id=DM, thread_ts=THREAD, status="is thinking…", loading_messages=["a", "b"]
    )
    await client.assistant_threads_setTitle(channel_id=DM, thread_ts=THREAD, title="Q")
    state = fake.assistant_threads[(DM, THREAD)]
    assert state["title"] == "Q" and state["statuses"] == [("is thinking…", ["a", "b"])]
    no_thread = client.assistant_threads_setStatus(channel_id=DM, thread_ts="", status="x")
    assert (await refusal(no_thread))["error"] == "invalid_thread_ts"
