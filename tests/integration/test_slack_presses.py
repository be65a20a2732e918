"""Slack presses checked against the run's own record. Two replicas sharing one real
Redis: a Stop forged (its value naming the presser as the asker) or replayed verbatim, at
the replica that does not run the run, from another channel or by someone who is not the
asker, is refused and the run goes on; the asker's own Stop there stops it. A Retry naming
a run of another channel is refused."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from typing import Any

from adapters import words
from adapters.slack.blocks import RETRY_ACTION_ID, STOP_ACTION_ID
from core.scripted import Turn
from core.stores.redis import RedisStores
from core.trace import Trace
from tests.fakes.slack_server import TEAM_ID, message_text
from tests.integration import test_slack_app
from tests.integration.test_slack_app import ASKER, CHANNEL, Harness, eventually

fake, make = test_slack_app.fake, test_slack_app.make
"""The Slack harness fixtures (the real Bolt app over HTTP, the strict fake)."""

ADMIN = "UADMIN"
ELSEWHERE = "C2RANDOM"


async def press(
    h: Harness, value: str, *, user: str, channel: str, action: str = STOP_ACTION_ID
) -> int:
    """A click as Slack signs it: the clicked message's channel is Slack's word."""
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "team": {"id": TEAM_ID},
        "channel": {"id": channel},
        "trigger_id": f"press.{uuid.uuid4().hex}",  # Slack mints one per press
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": channel, "message_ts": "9.0"},
        "actions": [
            {"type": "button", "action_id": action, "block_id": "b", "value": value,
             "action_ts": "1"}
        ],
    }  # fmt: skip
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    status, _, _ = await h.post(body, "application/x-www-form-urlencoded")
    return status


async def test_a_forged_or_replayed_stop_at_another_replica_is_refused(
    make: Any, two_processes: list[RedisStores]
) -> None:
    first, second = two_processes
    runs: Harness = await make(
        [Turn("Thought: thinking very hard about this", chunk_size=4, stall_after=3)],
        stops=first.stops,
        runs=first.runs,
        admin_users=frozenset({ADMIN}),
    )
    other: Harness = await make(
        [], stops=second.stops, runs=second.runs, admin_users=frozenset({ADMIN})
    )
    await runs.ask("a hard one")
    await eventually(lambda: any(STOP_ACTION_ID in json.dumps(m.blocks) for m in runs.fake.roots()))
    value = next(
        b["accessory"]["value"] for b in runs.root().blocks if b.get("accessory", {}).get("value")
    )
    run_id = value.partition(":")[0]
    attempts = [
        (f"{run_id}:U2BOB", "U2BOB", ELSEWHERE),  # forged: the value names the presser
        (value, "U2BOB", ELSEWHERE),  # replayed from another channel
        (f"{run_id}:U2BOB", "U2BOB", CHANNEL),  # forged in the run's channel
        (value, ADMIN, ELSEWHERE),  # an admin, but not where the run is
        (value, ASKER, ELSEWHERE),  # the asker herself, from a channel the run is not in
    ]
    for sent, user, channel in attempts:
        assert await press(other, sent, user=user, channel=channel) == 200
    await eventually(
        lambda: len(runs.fake.calls("chat.postEphemeral")) == len(attempts) or not runs.bot.running
    )
    assert runs.bot.running, "the run goes on"
    said = [c.args["text"] for c in runs.fake.calls("chat.postEphemeral")]
    refused, elsewhere = words.stop_refused("<@U1ADA>"), words.NOT_ITS_PLACE
    assert sorted(said) == sorted([refused] * 3 + [elsewhere] * 2), said  # the admin's, the asker's

    assert await press(other, value, user=ASKER, channel=CHANNEL) == 200
    await eventually(lambda: not runs.bot.running, within=2.0)  # delivered, not waited out
    await runs.settled()
    assert "Stopped by <@U1ADA> after step 1." in message_text(runs.root())
    assert not other.bot.running and other.model.calls == []


async def test_a_retry_naming_a_run_of_another_channel_is_refused(make: Any) -> None:
    h: Harness = await make(["Thought: no.\nFinal Answer: never asked"])
    asked_in = f"slack:{TEAM_ID}:{CHANNEL}:1.0"
    trace = Trace(question="our secret plans?", conversation=asked_in, id="r1")
    assert h.bot.agent.traces is not None
    await h.bot.agent.traces.save(trace)
    assert await press(h, "r1", user="U2BOB", channel=ELSEWHERE, action=RETRY_ACTION_ID) == 200
    await eventually(lambda: bool(h.fake.calls("chat.postEphemeral") or h.model.calls))
    assert h.model.calls == [], "the question was asked again"
    (said,) = h.fake.calls("chat.postEphemeral")
    assert said.args["text"].startswith("I no longer have that question"), said.args
