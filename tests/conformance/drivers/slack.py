"""The Slack driver: ``tests/integration/test_slack_app.py``'s harness (the real bolt app
served over HTTP, signed requests, its Web API client against the fake Slack)."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from adapters.room import Room
from adapters.slack.approval import APPROVE_ACTION_ID, DENY_ACTION_ID, EDIT_ACTION_ID
from adapters.slack.blocks import RETRY_ACTION_ID, STOP_ACTION_ID
from adapters.slack.modals import INPUT_BLOCK, REASON_BLOCK
from adapters.slack.stream_render import FEEDBACK_ACTION_ID
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace
from tests.conformance.driver import AskHandle, Persona, Said, Spot, normalise
from tests.fakes.slack_server import BOT_USER_ID, TEAM_ID, FakeSlack, Message, message_text
from tests.integration.test_slack_app import ASKER, CHANNEL, Harness, eventually, serving
from tests.integration.test_slack_approval import DELETE, ApprovalHarness, approvals, waiting

PEOPLE: dict[Persona, str] = {"asker": ASKER, "other": "U2BOB", "admin": "UADMIN"}
NAMES = {"U1ADA": "ada", "U2BOB": "bob", "UADMIN": "admin"}
ACK_WITHIN = 3.0
"""Slack retries (and shows an error) when a request is not acknowledged within 3 s."""


class SlackDriver:
    platform = "slack"

    def __init__(self, harness: Harness) -> None:
        self.h = harness
        self.model = harness.model
        self._ts = itertools.count(1)

    async def orphan(self, question: str) -> AskHandle:
        run_id = "deadrun"
        posted = await self.h.bot.client.chat_postMessage(channel=CHANNEL, text="🤔 Thinking")
        ts = str(posted["ts"])
        conversation = f"slack:{TEAM_ID}:{CHANNEL}:{ts}"
        trace = Trace(question=question, conversation=conversation, id=run_id)
        where = {"channel": CHANNEL, "ts": ts}
        dead = RunRecord(run_id, "Slack", conversation, "dead", where, trace=trace.to_json())
        await self.h.bot.stores.runs.beat([dead], at=time.time() - 600)
        return AskHandle("asker", question, ts, {"run": run_id})

    def _message(self, ts: str) -> Message:
        return next(m for m in self.h.fake.roots(CHANNEL) if m.ts == ts)

    async def orphan_finished(self, handle: AskHandle) -> str:
        await eventually(lambda: RETRY_ACTION_ID in json.dumps(self._message(handle.ref).blocks))
        return normalise(message_text(self._message(handle.ref)), NAMES)

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        payload = {
            "type": "block_actions",
            "user": {"id": PEOPLE[who]},
            "team": {"id": TEAM_ID},
            "channel": {"id": CHANNEL},
            "trigger_id": self.h.fake.trigger(),
            "api_app_id": "A1",
            "container": {"type": "message", "channel_id": CHANNEL, "message_ts": handle.ref},
            "actions": [
                {
                    "type": "button",
                    "action_id": RETRY_ACTION_ID,
                    "block_id": "b",
                    "value": handle.extra["run"],
                    "action_ts": "1",
                }
            ],
        }
        told = len(self.h.fake.calls("chat.postEphemeral"))
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        status, _, _ = await self.h.post(body, "application/x-www-form-urlencoded")
        assert status == 200
        await self.h.settled()
        said = self.h.fake.calls("chat.postEphemeral")[told:]
        return normalise(" ".join(str(c.args.get("text")) for c in said), NAMES)

    def ran(self) -> list[object]:
        return list(getattr(self.h, "ran", []))

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        assert isinstance(self.h, ApprovalHarness)
        await eventually(waiting(self.h.fake))
        told = len(self.h.fake.calls("chat.postEphemeral"))
        action = {"approve": APPROVE_ACTION_ID, "edit": EDIT_ACTION_ID}.get(verdict, DENY_ACTION_ID)
        views = len(self.h.fake.views)
        assert await self.h.click(action, user=PEOPLE[who]) == 200
        if verdict != "approve":
            await eventually(lambda: len(self.h.fake.views) > views)
            given = {INPUT_BLOCK: EDITED} if verdict == "edit" else {REASON_BLOCK: "not now"}
            status, _ = await self.h.submit(given, user=PEOPLE[who])
            assert status == 200
        said = self.h.fake.calls("chat.postEphemeral")[told:]
        return normalise(" ".join(str(c.args.get("text")) for c in said), NAMES)

    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle:
        n = next(self._ts)
        mention = {
            "type": "app_mention",
            "channel": CHANNEL,
            "user": PEOPLE[who],
            "ts": f"1800000000.{n:06d}",
            "text": f"<@{BOT_USER_ID}> {text}",
        }
        roots = len(self.h.fake.roots(CHANNEL))
        handle = AskHandle(who, text, mention, {"event_id": f"Ev{n}", "root": roots})
        if where == "thread":  # the thread of the first answer
            await eventually(lambda: bool(self.h.fake.roots(CHANNEL)))
            mention["thread_ts"] = handle.extra["thread"] = self.h.fake.roots(CHANNEL)[0].ts
        status, _, seconds = await self.h.event(mention, event_id=f"Ev{n}")
        assert status == 200 and seconds < ACK_WITHIN, "Slack's ack deadline"
        return handle

    async def redeliver(self, handle: AskHandle) -> Said:
        retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
        told = len(self.h.fake.calls("chat.postEphemeral"))
        status, _, _ = await self.h.event(handle.ref, event_id=handle.extra["event_id"], **retry)
        assert status == 200
        await self.final_text(handle)
        said = self.h.fake.calls("chat.postEphemeral")[told:]
        return normalise(" ".join(str(c.args.get("text")) for c in said), NAMES)

    async def _root_text(self, handle: AskHandle) -> str:
        index = handle.extra["root"]
        await eventually(lambda: len(self.h.fake.roots(CHANNEL)) > index)
        return message_text(self.h.fake.roots(CHANNEL)[index])

    async def running(self, handle: AskHandle) -> None:
        index = handle.extra["root"]

        def stoppable() -> bool:
            roots = self.h.fake.roots(CHANNEL)
            return len(roots) > index and STOP_ACTION_ID in json.dumps(roots[index].blocks)

        await eventually(lambda: stoppable() and bool(self.h.bot.running))

    async def refusal(self, handle: AskHandle) -> Said:
        user = PEOPLE[handle.who]

        def told() -> list[str]:
            return [
                str(c.args.get("text"))
                for c in self.h.fake.calls("chat.postEphemeral")
                if c.args.get("user") == user
            ]

        await eventually(lambda: bool(told()))
        return normalise(told()[-1], NAMES)

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        await self.running(handle)
        (run_id,) = self.h.bot.running
        told = len(self.h.fake.calls("chat.postEphemeral"))
        status, _, _ = await self.h.press_stop(run_id, user=PEOPLE[who])
        assert status == 200
        await eventually(
            lambda: (
                len(self.h.fake.calls("chat.postEphemeral")) > told
                or run_id not in self.h.bot.running
            )
        )
        said = self.h.fake.calls("chat.postEphemeral")[told:]
        return normalise(str(said[0].args["text"]), NAMES) if said else ""

    async def _settings(self, who: Persona, text: str) -> Said:
        status, body, seconds = await self.h.ask(text, user=PEOPLE[who], command="/ask-settings")
        assert status == 200 and seconds < ACK_WITHIN, "Slack's ack deadline"
        try:
            return normalise(str(json.loads(body)["text"]), NAMES)
        except (ValueError, KeyError, TypeError):
            return normalise(body, NAMES)

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        await self.final_text(handle)
        root = self.h.fake.roots(CHANNEL)[handle.extra["root"]]
        votes = [
            e
            for b in root.blocks
            if b.get("type") == "context_actions"
            for e in b["elements"]
            if e.get("action_id") == FEEDBACK_ACTION_ID
        ]
        assert votes, "no vote buttons under the answer"
        button = votes[0]["positive_button" if value == "up" else "negative_button"]
        return await self._press(who, FEEDBACK_ACTION_ID, str(button["value"]), root.ts)

    async def _press(self, who: Persona, action_id: str, value: str, ts: str) -> Said:
        """``who`` clicks a button under the message ``ts``; what they were told."""
        payload = {
            "type": "block_actions",
            "user": {"id": PEOPLE[who]},
            "team": {"id": TEAM_ID},
            "channel": {"id": CHANNEL},
            "trigger_id": self.h.fake.trigger(),
            "api_app_id": "A1",
            "container": {"type": "message", "channel_id": CHANNEL, "message_ts": ts},
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b",
                         "value": value, "action_ts": "1"}],
        }  # fmt: skip
        told = len(self.h.fake.calls("chat.postEphemeral"))
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        status, _, _ = await self.h.post(body, "application/x-www-form-urlencoded")
        assert status == 200
        await eventually(lambda: len(self.h.fake.calls("chat.postEphemeral")) > told)
        said = self.h.fake.calls("chat.postEphemeral")[told:]
        assert all(c.args.get("user") == PEOPLE[who] for c in said), "only the presser hears"
        return normalise(" ".join(str(c.args.get("text")) for c in said), NAMES)

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        if name != "persona":
            return await self._settings(who, f"{name} {value}")
        opened = len(self.h.fake.views)
        refused = await self._settings(who, "prompt")  # the modal, for an admin
        if len(self.h.fake.views) == opened:
            return refused
        told = len(self.h.fake.calls("chat.postEphemeral"))
        view = self.h.fake.views[-1]
        submitted = self.h.fake.submission(view, {INPUT_BLOCK: value}, user=PEOPLE[who])
        body = urllib.parse.urlencode({"payload": json.dumps(submitted)})
        status, text, _ = await self.h.post(body, "application/x-www-form-urlencoded")
        assert status == 200
        if text.strip():  # the modal stays open with its error
            return normalise(str(json.loads(text)["errors"][INPUT_BLOCK]), NAMES)
        await eventually(lambda: len(self.h.fake.calls("chat.postEphemeral")) > told)
        said = self.h.fake.calls("chat.postEphemeral")[-1].args["text"]
        return normalise(str(said), NAMES)

    async def usage(self, who: Persona) -> Said:
        return await self._settings(who, "usage")

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said:
        # decision 7: not a new slash command (and a slash command names no thread)
        return await self._settings(who, "reset")

    async def trace(self, who: Persona) -> Said:
        return await self._settings(who, "trace")

    async def final_text(self, handle: AskHandle) -> str:
        if "thread" in handle.extra:  # answered in the thread: its newest message
            await self.h.settled()
            replies = self.h.fake.replies(CHANNEL, handle.extra["thread"])
            return normalise(message_text(replies[-1]), NAMES)
        await self._root_text(handle)
        await self.h.settled()
        return normalise(await self._root_text(handle), NAMES)

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        if conversation is None:
            traces = await self.traces()
            assert traces, "no run here yet"
            conversation = traces[0].conversation
        return list(await self.h.bot.agent.history.load(conversation))

    async def settled(self) -> None:
        await self.h.settled()

    async def traces(self) -> list[Trace]:
        return list(await self.h.bot.agent.traces.recent())

    def named(self, who: Persona) -> str | None:
        return f"@{NAMES[PEOPLE[who]]}"


ACT = DELETE
EDITED = '{"path": "drafts/edited.md"}'


@contextlib.asynccontextmanager
async def driving(
    turns: list[Turn | str],
    *,
    merge_window: float = 0.0,
    approval: bool = False,
    lease: float | None = None,
    room: int | None = None,
    elsewhere: bool = False,
) -> AsyncIterator[Any]:
    leased: dict[str, Any] = {} if lease is None else {"run_lease": lease}
    if elsewhere:
        leased["allowed_channels"] = frozenset({"C9ELSEWHERE"})
    async with FakeSlack() as fake, (approvals if approval else serving)(fake) as make:
        roomed = {} if room is None else {"room": Room(room)}
        harness = await make(list(turns), merge_window=merge_window, **leased, **roomed)
        yield SlackDriver(harness)
