"""Discord's half of crash recovery: an answer a dead process left "thinking" (its record in
the registry, its heartbeat long stopped) is finished by the next process through the real
discord.py client against the fake: the message says it was interrupted and its buttons are
gone, in both layouts; the trace is stored as interrupted."""

from __future__ import annotations

import time

import pytest

from adapters.recovery import INTERRUPTED
from core.stores import InMemoryRunRegistry, RunRecord
from core.trace import Trace
from tests.fakes.discord_limits import IS_COMPONENTS_V2, components_text
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.integration.test_discord import running

STOP_ROW = [
    {
        "type": 1,
        "components": [
            {"type": 2, "style": 4, "label": "Stop", "custom_id": "reactbot:stop:deadrun:1001"}
        ],
    }
]


@pytest.mark.parametrize("layout", ["text", "components"])
async def test_an_answer_a_dead_process_left_is_finished(layout: str) -> None:
    fake = FakeDiscord()
    fake.add_channel(CHANNEL_ID)
    if layout == "text":
        body = {"content": "🤔 Thinking · step 1/8 · 3.0 s", "components": STOP_ROW}
        left = fake._new_message(CHANNEL_ID, body, ())
    else:
        card = {"type": 17, "components": [{"type": 10, "content": "🤔 Thinking"}, *STOP_ROW]}
        left = fake._new_message(CHANNEL_ID, {"components": [card]}, (), flags=IS_COMPONENTS_V2)
    message_id = int(left["id"])
    trace = Trace(question="what is up?", conversation=f"discord:{CHANNEL_ID}", id="deadrun")
    runs = InMemoryRunRegistry()
    where = {"channel": str(CHANNEL_ID), "message": str(message_id)}
    dead = RunRecord("deadrun", "Discord", trace.conversation, "dead", where, trace=trace.to_json())
    await runs.beat([dead], at=time.time() - 600)  # its heartbeat stopped ten minutes ago
    again = ["Thought: easy.\nFinal Answer: all is well"]
    async with running(again, fake=fake, runs=runs, run_lease=1.0, layout=layout) as h:
        await fake.wait_for_call(
            lambda c: c.method == "PATCH" and c.path.endswith(f"/messages/{message_id}")
        )
        shown = fake.messages[message_id]
        if layout == "text":
            assert shown["content"].startswith(INTERRUPTED)
            assert "reactbot:stop" not in str(shown["components"])
        else:
            assert shown["flags"] & IS_COMPONENTS_V2 and shown["content"] == ""
            assert INTERRUPTED in "\n".join(components_text(shown["components"]))
            assert "reactbot:stop" not in str(shown["components"])
        stored = await h.traces.get("deadrun")
        assert stored is not None and stored.status == "interrupted"
        assert not await runs.running("Discord", "deadrun")
        # Retry asks the question again, as whoever presses it, in a new reply.
        assert "reactbot:retry:deadrun" in str(shown["components"])
        press = fake.button_press(message_id, "reactbot:retry:deadrun")
        await fake.dispatch("INTERACTION_CREATE", press)
        await fake.wait_for_call(lambda c: "all is well" in str(c.json))
        assert "what is up?" in str(h.model.calls[0].messages[-1]["content"])


async def test_a_retry_naming_a_run_of_another_channel_is_refused() -> None:
    # A run id is read by everyone who saw its message; a custom id naming it, pressed in
    # another channel, must neither read out nor ask again that channel's question.
    fake = FakeDiscord()
    elsewhere = CHANNEL_ID + 1
    fake.add_channel(elsewhere)
    async with running(["Thought: no.\nFinal Answer: never asked"], fake=fake) as h:
        trace = Trace(question="our secret plans?", conversation=f"discord:{CHANNEL_ID}", id="r1")
        trace.status = "interrupted"
        await h.traces.save(trace)
        retry = [{"type": 1, "components": [
            {"type": 2, "style": 2, "label": "Retry", "custom_id": "reactbot:retry:r1"}
        ]}]  # fmt: skip
        mine = fake._new_message(elsewhere, {"content": "mine", "components": retry}, ())
        press = fake.button_press(
            int(mine["id"]), "reactbot:retry:r1", channel_id=elsewhere, author_id=2002
        )
        await fake.dispatch("INTERACTION_CREATE", press)
        answer = await fake.wait_for_call(lambda c: c.path.endswith("/callback"))
        assert answer.json["data"]["flags"] == 64
        assert answer.json["data"]["content"].startswith("I no longer have that question")
        assert h.model.calls == []
