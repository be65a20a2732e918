# ruff: noqa: F811 - the fixtures are imported from test_slack_app and requested by name
"""Slack's agent streaming and assistant surface end to end: the real bolt app over HTTP,
its real slack_sdk client against the strict fake (chat.startStream / appendStream /
stopStream, assistant.threads.*), scripted models."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import uuid
from typing import Any

from adapters import words
from adapters.slack.stream_render import FEEDBACK_ACTION_ID
from tests.fakes.slack_server import TEAM_ID, FakeSlack, Stream, message_text
from tests.integration.test_slack_app import (  # noqa: F401 - fixtures used by name
    ASKER,
    CHANNEL,
    Harness,
    eventually,
    fake,
    make,
    tool_then_answer,
)

DM = "D1ADA"


async def dm(h: Harness, text: str, *, n: int = 1, thread_ts: str | None = None) -> str:
    ts = f"1710000000.{n:06d}"
    event: dict[str, Any] = {
        "type": "message",
        "channel_type": "im",
        "channel": DM,
        "user": ASKER,
        "text": text,
        "ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    status, _, _ = await h.event(event, event_id=f"Ev{n}")
    assert status == 200
    return ts


async def mention(h: Harness, text: str, *, n: int = 1) -> str:
    ts = f"1720000000.{n:06d}"
    event = {"type": "app_mention", "channel": CHANNEL, "user": ASKER, "text": text, "ts": ts}
    status, _, _ = await h.event(event, event_id=f"Em{n}")
    assert status == 200
    return ts


def only_stream(fake: FakeSlack) -> Stream:
    assert len(fake.streams) == 1, fake.streams
    return next(iter(fake.streams.values()))


async def click_feedback(h: Harness, value: str, *, user: str) -> None:
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "team": {"id": TEAM_ID},
        "channel": {"id": DM},
        "trigger_id": f"click.{uuid.uuid4().hex}",  # Slack mints one per press
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": DM},
        "actions": [
            {
                # a FeedbackButtonsAction (bolt-js src/types/actions/block-action.ts)
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION_ID,
                "block_id": "b",
                "value": value,
                "text": {"type": "plain_text", "text": "👍"},
                "action_ts": "1",
            }
        ],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    status, _, _ = await h.post(body, "application/x-www-form-urlencoded")
    assert status == 200


# ---- a DM streams natively --------------------------------------------------------------------


async def test_a_dm_streams_a_plan_of_tasks_then_the_answer_and_stops_with_feedback(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(tool_then_answer(delay=0.05))
    asked = await dm(h, "What is 17*23?")
    await h.settled()

    stream = only_stream(fake)
    assert stream.thread_ts == asked and stream.task_display_mode == "plan"
    assert not stream.streaming and not stream.stopped_by_slack
    assert stream.plan_title == "Plan: What is 17*23?"
    task = stream.tasks["step-1"]
    assert task["title"] == "calculate: 17*23" and task["status"] == "complete"
    assert task["details"] == "This is arithmetic; I will use the calculator."
    assert task["output"] == "391"
    # no card is left spinning (a step's thinking that became the answer is complete too)
    assert all(t["status"] == "complete" for t in stream.tasks.values()), stream.tasks
    statuses = [u["status"] for u in stream.task_updates if u["id"] == "step-1"]
    assert statuses[0] == "in_progress" and statuses[-1] == "complete"
    assert "17*23 = 391." in stream.markdown
    # never markdown_text and chunks in one call; every call accepted
    for method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
        for call in fake.calls(method):
            assert call.error is None, (method, call.error, call.errors)
            assert not ("markdown_text" in call.args and "chunks" in call.args)
    blocks = json.dumps(stream.blocks)
    assert '"feedback_buttons"' in blocks and '"context_actions"' in blocks
    assert "2 steps" not in blocks or "1 step" in blocks  # the totals line counts tool steps
    assert not fake.calls("chat.update"), "a DM streams natively under streaming: auto"
    # the trace goes into the same thread
    assert any("*Step 1*" in message_text(m) for m in fake.replies(DM, asked))
    h.model.assert_complete()


async def test_a_vote_is_recorded_on_the_trace_and_shown_by_trace_show(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(tool_then_answer())
    await dm(h, "What is 17*23?")
    await h.settled()
    value = only_stream(fake).blocks[-1]["elements"][0]["positive_button"]["value"]
    run_id = value.removeprefix("up:")
    await click_feedback(h, value, user="U2BOB")
    await click_feedback(h, f"down:{run_id}", user=ASKER)
    await click_feedback(h, "up:not-a-run", user=ASKER)  # unknown: ignored
    await h.settled()
    traces = h.bot.agent.traces
    assert traces is not None
    trace = await traces.get(run_id)
    assert trace is not None
    assert [(v.value, v.by) for v in trace.votes] == [("up", "U2BOB"), ("down", ASKER)]
    assert "**Feedback:** 👍 1 · 👎 1" in trace.to_markdown()  # what `trace show` prints
    told = [(c.args["user"], c.args["text"]) for c in fake.calls("chat.postEphemeral")]
    assert told[:2] == [("U2BOB", words.vote_kept("up")), (ASKER, words.vote_kept("down"))]
    assert all(c.args.get("thread_ts") is None for c in fake.calls("chat.postEphemeral"))


# ---- where it streams, and where it falls back ----------------------------------------------


async def test_auto_uses_chat_update_in_channels_and_native_streams_there(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(tool_then_answer() + tool_then_answer())
    await mention(h, "<@UBOTREACT> What is 17*23?", n=1)
    await h.settled()
    assert not fake.streams and fake.calls("chat.update")

    h2: Harness = await make(tool_then_answer(), streaming="native")
    asked = await mention(h2, "<@UBOTREACT> What is 17*23?", n=2)
    await h2.settled()
    stream = only_stream(fake)
    assert stream.thread_ts == asked
    # required outside DMs; the fake refuses a start without them
    assert stream.recipient_user_id == ASKER and stream.recipient_team_id == TEAM_ID


async def test_update_mode_never_streams(make: Any, fake: FakeSlack) -> None:
    h: Harness = await make(tool_then_answer(), streaming="update")
    await dm(h, "What is 17*23?")
    await h.settled()
    assert not fake.streams and not fake.calls("chat.startStream")
    assert "17*23 = 391." in message_text(h.root(DM))


async def test_where_slack_will_not_stream_the_answer_comes_by_chat_update(
    make: Any, fake: FakeSlack
) -> None:
    fake.no_streaming.add(DM)
    h: Harness = await make(tool_then_answer())
    await dm(h, "What is 17*23?")
    await h.settled()
    refused = fake.calls("chat.startStream")
    assert refused and refused[0].error == "channel_type_not_supported"
    assert not fake.streams
    assert "17*23 = 391." in message_text(h.root(DM))


async def test_a_stream_slack_closes_goes_on_in_a_new_message_of_the_thread(
    make: Any, fake: FakeSlack
) -> None:
    long_answer = "A long answer. " * 200  # 3,000 characters
    fake.stream_max_chars = 1_000
    h: Harness = await make(tool_then_answer(long_answer))
    asked = await dm(h, "Tell me a lot")
    await h.settled()
    streams = list(fake.streams.values())
    assert len(streams) >= 2 and streams[0].stopped_by_slack
    assert all(s.thread_ts == asked for s in streams)
    assert any(c.error == "message_not_in_streaming_state" for c in fake.calls("chat.appendStream"))
    whole = "".join(s.markdown.replace("_(continued)_\n\n", "") for s in streams)
    assert long_answer.strip() in whole.replace("\u200b", "")
    assert not streams[-1].streaming and streams[-1].blocks  # ended, with its buttons


async def test_rate_limited_appends_wait_and_the_answer_still_arrives_whole(
    make: Any, fake: FakeSlack
) -> None:
    fake.fail("chat.appendStream", "ratelimited", status=429, retry_after=1, times=2)
    h: Harness = await make(tool_then_answer())
    await dm(h, "What is 17*23?")
    await h.settled()
    stream = only_stream(fake)
    assert "17*23 = 391." in stream.markdown and not stream.streaming
    assert h.bot.stream_pacers.append.rate_limited >= 1
    assert len([c for c in fake.calls("chat.appendStream") if c.status == 429]) == 2


async def test_a_refused_token_mid_stream_still_ends_in_a_final_message(
    make: Any, fake: FakeSlack
) -> None:
    fake.fail("chat.appendStream", "invalid_auth", times=50)
    fake.fail("chat.stopStream", "invalid_auth", times=5)
    h: Harness = await make(tool_then_answer())
    asked = await dm(h, "What is 17*23?")
    await h.settled()
    finals = [m for m in fake.replies(DM, asked) if "17*23 = 391." in message_text(m)]
    assert finals, "the answer is posted as a message of its own"


# ---- the assistant surface ----------------------------------------------------------------


async def test_an_assistant_thread_gets_prompts_status_title_and_a_streamed_answer(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(
        tool_then_answer(delay=0.02),
        suggested_prompts=(("Calculate", "What is 17*23?"),),
    )
    thread = "1730000000.000001"
    started = {
        "type": "assistant_thread_started",
        "assistant_thread": {
            "user_id": ASKER,
            "context": {},
            "channel_id": DM,
            "thread_ts": thread,
        },
        "event_ts": "1730000000.000002",
    }
    status, _, _ = await h.event(started, event_id="Ea1")
    assert status == 200
    await eventually(lambda: (DM, thread) in fake.assistant_threads)
    assert fake.assistant_threads[(DM, thread)]["prompts"] == [
        {"title": "Calculate", "message": "What is 17*23?"}
    ]

    await dm(h, "What is 17*23?", n=2, thread_ts=thread)
    await h.settled()
    await asyncio.sleep(0.1)  # status updates are spawned tasks; settled waited for them
    state = fake.assistant_threads[(DM, thread)]
    assert state["title"] == "What is 17*23?"
    shown = [s for s, _ in state["statuses"]]
    assert shown[0] == "is thinking…" and "is running calculate…" in shown
    assert shown[-1] == ""  # cleared when the answer is there
    assert any(loading for s, loading in state["statuses"] if s)
    stream = only_stream(fake)
    assert stream.thread_ts == thread and "17*23 = 391." in stream.markdown
    # the thread is the conversation
    trace = h.bot.agent.traces and await h.bot.agent.traces.get(
        stream.blocks[-1]["elements"][0]["positive_button"]["value"].removeprefix("up:")
    )
    assert trace and trace.conversation == f"slack:{TEAM_ID}:{DM}:{thread}"


# ---- hostile text, verbosity --------------------------------------------------------------


async def test_hostile_pages_and_answers_stream_without_pings_or_masked_links(
    make: Any, fake: FakeSlack
) -> None:
    from core.scripted import Turn
    from tests.integration.test_slack_app import HOSTILE

    turns = [
        Turn(f"Thought: {HOSTILE}\nAction: search[{HOSTILE}]", chunk_size=40),
        Turn(f"Thought: done\nAction: finish[{HOSTILE * 40}]", chunk_size=200),
    ]
    h: Harness = await make(turns)
    await dm(h, "Tell me")
    await h.settled()
    calls = [
        c
        for m in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for c in fake.calls(m)
    ]
    assert calls and all(c.error is None for c in calls), [(c.method, c.errors) for c in calls]
    sent = json.dumps([c.args for c in calls], ensure_ascii=False)
    for bad in ("<!channel>", "<!here>", "<!everyone>", "<@U999>", "](https://evil", "<https://"):
        assert bad not in sent, bad
    stream = only_stream(fake)
    card = stream.tasks["step-1"]
    assert card["title"].startswith("search: ") and len(card["title"]) <= 256
    assert len(card["output"]) <= 256 and card["output"].endswith("lines)")  # folded
    assert {s["text"] for s in card.get("sources", [])} <= {"docs.example.org", "evil.example"}


async def test_answer_verbosity_streams_only_the_answer_and_opens_no_thread(
    make: Any, fake: FakeSlack
) -> None:
    from adapters.slack.settings_commands import settings_key

    h: Harness = await make(tool_then_answer())
    await h.bot.stores.channel_settings.put(settings_key(TEAM_ID, DM), "verbosity", "answer")
    asked = await dm(h, "What is 17*23?")
    await h.settled()
    stream = only_stream(fake)
    assert not stream.task_updates and stream.plan_title is None
    assert "17*23 = 391." in stream.markdown
    assert [m for m in fake.replies(DM, asked) if "*Step 1*" in message_text(m)] == []


async def test_compact_verbosity_shows_task_titles_only(make: Any, fake: FakeSlack) -> None:
    from adapters.slack.settings_commands import settings_key

    h: Harness = await make(tool_then_answer(delay=0.02))
    await h.bot.stores.channel_settings.put(settings_key(TEAM_ID, DM), "verbosity", "compact")
    await dm(h, "What is 17*23?")
    await h.settled()
    stream = only_stream(fake)
    assert stream.task_updates
    assert all(set(u) == {"type", "id", "title", "status"} for u in stream.task_updates)


async def test_a_shutdown_mid_stream_ends_the_reply_in_a_stopped_state(
    make: Any, fake: FakeSlack
) -> None:
    h: Harness = await make(tool_then_answer(delay=0.2))
    await dm(h, "What is 17*23?")
    await eventually(lambda: bool(fake.calls("chat.appendStream", ok=True)))
    await h.bot.aclose()
    stream = only_stream(fake)
    assert not stream.streaming, "stopped, not left streaming"
    assert "reactbot was restarting. Ask again in a moment." in stream.markdown
    assert all(t["status"] in ("complete", "error") for t in stream.tasks.values())
