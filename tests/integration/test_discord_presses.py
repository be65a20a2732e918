"""Sources and votes on Discord answer only from the run's own conversation (issue 47): a
run id is read by everyone who saw its message, and a custom id naming it, pressed in
another channel, must neither list that conversation's cited links nor vote on its trace."""

from __future__ import annotations

import pytest

from core.trace import Trace
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.integration.test_discord import running

SECRET_LINK = "https://intranet.example/merger-plans"


@pytest.mark.parametrize(
    ("custom_id", "refused"),
    [
        ("reactbot:sources:r1", "I no longer have this run's sources"),
        ("reactbot:vote:up:r1", "I could not record that"),
    ],
)
async def test_a_press_naming_a_run_of_another_channel_reads_and_writes_nothing(
    custom_id: str, refused: str
) -> None:
    fake = FakeDiscord()
    elsewhere = CHANNEL_ID + 1
    fake.add_channel(elsewhere)
    async with running([], fake=fake) as h:
        trace = Trace(question="our plans?", conversation=f"discord:{CHANNEL_ID}", id="r1")
        trace.cited = [SECRET_LINK]
        await h.traces.save(trace)
        row = [{"type": 1, "components": [
            {"type": 2, "style": 2, "label": "Press", "custom_id": custom_id}
        ]}]  # fmt: skip
        mine = fake._new_message(elsewhere, {"content": "mine", "components": row}, ())
        press = fake.button_press(int(mine["id"]), custom_id, channel_id=elsewhere, author_id=2002)
        await fake.dispatch("INTERACTION_CREATE", press)
        answer = await fake.wait_for_call(lambda c: c.path.endswith("/callback"))
        said = answer.json["data"]["content"]
        assert answer.json["data"]["flags"] & 64 and said.startswith(refused), said  # ephemeral
        assert SECRET_LINK not in said
        stored = await h.traces.get("r1")
        assert stored is not None and stored.votes == []


async def test_the_same_presses_in_the_runs_own_channel_still_work() -> None:
    async with running([]) as h:
        trace = Trace(question="our plans?", conversation=f"discord:{CHANNEL_ID}", id="r1")
        trace.cited = [SECRET_LINK]
        await h.traces.save(trace)
        for custom_id in ("reactbot:sources:r1", "reactbot:vote:up:r1"):
            row = [{"type": 1, "components": [
                {"type": 2, "style": 2, "label": "Press", "custom_id": custom_id}
            ]}]  # fmt: skip
            mine = h.fake._new_message(CHANNEL_ID, {"content": "x", "components": row}, ())
            await h.fake.dispatch(
                "INTERACTION_CREATE", h.fake.button_press(int(mine["id"]), custom_id)
            )
        await h.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and "recorded" in str(c.json)
        )
        said = [c.json["data"]["content"] for c in h.fake.calls if c.path.endswith("/callback")]
        assert any(SECRET_LINK in s for s in said)
        stored = await h.traces.get("r1")
        assert stored is not None and [v.value for v in stored.votes] == ["up"]
