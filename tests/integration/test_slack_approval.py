"""Approvals in Slack end to end: the real bolt app served over HTTP, signed ``block_actions``
and ``view_submission`` payloads posted to it, modals opened on the strict fake Slack
(``views.open`` with the click's trigger), a scripted model and a tool that needs approval;
two replicas sharing one Redis for a click that lands on the replica not running the run."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import pytest

from adapters import words
from adapters.slack.approval import (
    ALWAYS_ACTION_ID,
    APPROVE_ACTION_ID,
    DENY_ACTION_ID,
    EDIT_ACTION_ID,
)
from adapters.slack.blocks import STOP_ACTION_ID
from adapters.slack.bot import SlackBot
from adapters.slack.modals import INPUT_BLOCK, REASON_BLOCK
from adapters.slack.server import HttpServer
from adapters.slack.settings import SlackSettings
from core.agent import Agent, AgentSettings
from core.approval import (
    ApprovalBroker,
    ApprovalRequest,
    Decision,
    DecisionChannel,
    InMemoryAllowances,
    InMemoryDecisions,
    InMemoryPending,
    PendingRequests,
    RequestKey,
)
from core.errors import StoreUnavailable
from core.history import InMemoryHistoryStore
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryTraceStore, RunRegistry
from core.stores.redis import RedisStores
from core.tools import FunctionTool, ToolHints, ToolRegistry
from tests.fakes.slack_server import (
    BOT_USER_ID,
    PRIVATE_METADATA,
    TEAM_ID,
    FakeSlack,
    Message,
    message_text,
    validate_view,
)
from tests.integration.test_slack_app import ASKER, CHANNEL, SECRET, Harness, eventually
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

PATH = '{"path": "drafts/q3.md"}'
THOUGHT = "The user asked me to delete the draft; the tool can do it."
DELETE = f"Thought: {THOUGHT}\nAction: files_delete[{PATH}]"
DONE = "Thought: It is done.\nAction: finish[Done.]"
STRANGER = "U2BOB"
ADMIN = "UADMIN"


@dataclass
class ApprovalHarness(Harness):
    ran: list[dict[str, Any]] = field(default_factory=list)
    """What the tool ran with, in order."""

    async def payload(self, payload: dict[str, Any]) -> tuple[int, str]:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        status, text, _ = await self.post(body, "application/x-www-form-urlencoded")
        return status, text

    async def click(self, action_id: str, *, user: str, message: Message | None = None) -> int:
        """``user`` clicks a button of ``message`` (the root), as Slack posts it."""
        message = message or self.root()
        (element,) = [e for e in buttons(message) if e["action_id"] == action_id]
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
            "api_app_id": "A1",
            "token": "legacy",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
            },
            "trigger_id": self.fake.trigger(),
            "team": {"id": TEAM_ID, "domain": "fake"},
            "channel": {"id": message.channel, "name": "general"},
            "message": {"type": "message", "ts": message.ts, "text": message.text},
            "actions": [
                {
                    "type": "button",
                    "action_id": element["action_id"],
                    "block_id": "approval",
                    "text": element["text"],
                    "value": element["value"],
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        status, _ = await self.payload(payload)
        return status

    async def submit(
        self, values: dict[str, str | None], *, user: str, view: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """``user`` submits the last modal opened (or ``view``) with ``values``; Slack's
        answer to the submission (``{}``: the modal closes)."""
        view = view or self.fake.views[-1]
        status, text = await self.payload(self.fake.submission(view, values, user=user))
        return status, (json.loads(text) if text.strip() else {})

    def ephemerals(self) -> list[str]:
        return [str(c.args["text"]) for c in self.fake.calls("chat.postEphemeral")]


def snapshot(message: Message) -> Message:
    """The message as it is now (the fake updates its ``Message`` in place): a copy someone
    still sees in their client after the bot has edited it."""
    return Message(
        message.channel, message.ts, message.text, copy.deepcopy(message.blocks), message.thread_ts
    )


def buttons(message: Message) -> list[dict[str, Any]]:
    return [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


def waiting(fake: FakeSlack, channel: str = CHANNEL) -> Callable[[], bool]:
    """The predicate: a message in ``channel`` shows approval buttons."""
    return lambda: any(
        buttons(m) for m in fake.messages.values() if m.channel == channel and m.blocks
    )


def versions_text(message: Message) -> list[str]:
    return [
        message_text(Message(message.channel, message.ts, t, b, None))
        for _, t, b in message.versions
    ]


def approval_versions(message: Message) -> list[int]:
    """Indexes of the message's versions that show approval buttons."""
    return [
        i
        for i, (_, _, blocks) in enumerate(message.versions)
        if any(b["type"] == "actions" for b in blocks)
    ]


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def make(fake: FakeSlack) -> AsyncIterator[Callable[..., Any]]:
    """``await make(turns, *, decisions=None, pending=None, approval_timeout=30, **settings)``:
    a served bot whose agent asks its ``ApprovalBroker`` before ``files_delete`` runs."""
    async with approvals(fake) as build:
        yield build


@contextlib.asynccontextmanager
async def approvals(fake: FakeSlack) -> AsyncIterator[Callable[..., Any]]:
    """``make`` outside pytest's fixtures (the conformance drivers use it)."""
    opened: list[tuple[HttpServer, SlackBot, aiohttp.ClientSession]] = []
    brokers: list[ApprovalBroker] = []

    async def build(
        turns: list[Turn | str],
        *,
        decisions: DecisionChannel | None = None,
        pending: PendingRequests | None = None,
        runs: RunRegistry | None = None,
        approval_timeout: float = 30.0,
        **overrides: Any,
    ) -> ApprovalHarness:
        ran: list[dict[str, Any]] = []

        async def files_delete(path: str) -> str:
            ran.append({"path": path})
            await asyncio.sleep(0.3)  # long enough for the live message to show the decision
            return f"deleted {path}"

        tools = ToolRegistry()
        tools.add(
            FunctionTool(
                "files_delete",
                files_delete,
                "Deletes a file.",
                f"files_delete[{PATH}]",
                parameters={
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
                hints=ToolHints(),  # not read-only: a person approves each run
            )
        )
        model = ScriptedModel(turns)
        broker = ApprovalBroker(decisions or InMemoryDecisions(), pending or InMemoryPending())
        brokers.append(broker)  # the application's to close, as App.aclose does
        agent = Agent(
            model,
            tools,
            history=InMemoryHistoryStore(),
            traces=InMemoryTraceStore(),
            locks=InMemoryLocks(),
            approve=broker,
            allowances=InMemoryAllowances(),
            settings=AgentSettings(
                model_timeout=5.0, deadline=20.0, approval_timeout=approval_timeout
            ),
        )
        settings = SlackSettings(
            bot_token="xoxb-test",
            signing_secret=SECRET,
            mode="http",
            host="127.0.0.1",
            port=0,
            api_base_url=fake.base_url,
            update_interval=0.25,
            workspace_updates_per_minute=0,
            shutdown_grace=3.0,
        )
        own, policy = split(
            "slack", **{"admin_users": frozenset({ADMIN}), "cooldown_seconds": 0.0, **overrides}
        )
        bot = SlackBot(
            agent,
            stores=in_memory_stores(runs=runs),
            settings=replace(settings, **own),
            policy=policy,
            broker=broker,
        )
        await bot.start()
        server = HttpServer(bot, host="127.0.0.1", port=0, path=settings.path)
        port = await server.start()
        session = aiohttp.ClientSession()
        opened.append((server, bot, session))
        url = f"http://127.0.0.1:{port}/slack/events"
        return ApprovalHarness(fake, bot, model, url, session, ran=ran)

    try:
        yield build
    finally:
        for server, bot, session in opened:
            await server.stop()
            await bot.aclose()
            await session.close()
        for broker in brokers:
            await broker.aclose()


def prompts(h: Harness, call: int) -> str:
    """Everything the model was sent on its ``call``-th call (0-based)."""
    return "\n".join(str(m["content"]) for m in h.model.calls[call].messages)


def thread_text(h: Harness) -> str:
    return "\n".join(message_text(m) for m in h.fake.replies(CHANNEL, h.root().ts))


# ---- the decisions ----------------------------------------------------------------------------


async def test_approve_runs_the_action_and_the_step_says_who_approved(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE, DONE])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    pending = message_text(h.root())
    assert f"*Thought:* {THOUGHT}" in pending
    assert f"*Action:* *files_delete*\n```\n{PATH}\n```" in pending
    assert "only <@U1ADA> or an admin can decide · denied automatically in 30 s" in pending
    assert "waiting for approval" in pending and STOP_ACTION_ID in json.dumps(h.root().blocks)
    assert [e["text"]["text"] for e in buttons(h.root())] == [
        "✅ Approve",
        "✏️ Edit…",
        "❌ Deny",
        "♾️ Allow in this conversation",
    ]  # the shared words (adapters.words.BUTTONS)
    assert h.ran == [], "nothing runs before a person decides"

    assert await h.click(APPROVE_ACTION_ID, user=ASKER) == 200
    await h.settled()
    assert h.ran == [{"path": "drafts/q3.md"}]
    root = h.root()
    shown = versions_text(root)
    last_pending = approval_versions(root)[-1]
    assert last_pending < len(root.versions) - 1 and not buttons(root), "the buttons go"
    assert any("✅ approved by <@U1ADA>" in s for s in shown[last_pending + 1 :])
    final = message_text(root)
    assert "Done." in final and "Approvals: 1 · *files_delete* ✅ approved by <@U1ADA>" in final
    assert "*Approval:* ✅ approved by <@U1ADA>" in thread_text(h)
    assert "deleted drafts/q3.md" in prompts(h, 1)
    assert h.ephemerals() == [] and h.fake.views == []
    h.model.assert_complete()


async def test_edit_opens_a_modal_and_the_edited_input_runs(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE, DONE])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    assert await h.click(EDIT_ACTION_ID, user=ASKER) == 200
    await eventually(lambda: bool(h.fake.views))
    (view,) = h.fake.views
    assert validate_view({k: view[k] for k in ("type", "title", "blocks", "submit", "close")}) == []
    assert len(view["private_metadata"]) <= PRIVATE_METADATA
    (field_,) = [b for b in view["blocks"] if b.get("block_id") == INPUT_BLOCK]
    element = field_["element"]
    assert field_["label"]["text"] == "Input (a JSON object)"
    assert element["initial_value"] == PATH and element["multiline"] is True
    assert len(element["initial_value"]) <= element["max_length"] <= 3000

    status, answer = await h.submit({INPUT_BLOCK: '{"path": "drafts/q3-old.md"'}, user=ASKER)
    assert status == 200 and answer["response_action"] == "errors"
    assert list(answer["errors"]) == [INPUT_BLOCK]
    assert answer["errors"][INPUT_BLOCK].startswith("This is not valid JSON (")
    assert h.ran == [], "a bad edit decides nothing; the modal stays open"

    edited = '{"path": "drafts/q3-old.md"}'
    status, answer = await h.submit({INPUT_BLOCK: edited, REASON_BLOCK: "the old one"}, user=ASKER)
    assert (status, answer) == (200, {})
    await h.settled()
    assert h.ran == [{"path": "drafts/q3-old.md"}]
    assert "a person edited the input before it ran" in prompts(h, 1)
    assert "files_delete[" + edited + "]" in prompts(h, 1)
    shown = "\n".join(versions_text(h.root()))
    assert '✏️ edited by <@U1ADA>: "the old one"' in shown
    assert "drafts/q3-old.md" in shown, "the action shows the edited input"
    assert (
        '*Approval:* ✏️ edited by <@U1ADA> (the model wrote: {"path": "drafts/q3.md"}): '
        '"the old one"' in thread_text(h)
    )
    h.model.assert_complete()


async def test_deny_with_a_reason_is_an_observation_and_the_run_goes_on(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE, "Thought: Not allowed.\nAction: finish[I left it.]"])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    assert await h.click(DENY_ACTION_ID, user=ASKER) == 200
    await eventually(lambda: bool(h.fake.views))
    (view,) = h.fake.views
    assert view["title"]["text"] == "Deny the action" and view["submit"]["text"] == "Deny"
    assert [b["block_id"] for b in view["blocks"] if b["type"] == "input"] == [REASON_BLOCK]
    status, answer = await h.submit({REASON_BLOCK: "not <!here> that one"}, user=ASKER)
    assert (status, answer) == (200, {})
    await h.settled()
    assert h.ran == []
    # fenced for the model: its angle brackets are stand-ins (the trace keeps them as said)
    assert "The user denied this action. Their reason: not ‹!here› that one" in prompts(h, 1)
    final = message_text(h.root())
    assert "I left it." in final
    assert '🚫 denied by <@U1ADA>: "not &lt;!here&gt; that one"' in final
    assert '*Approval:* 🚫 denied by <@U1ADA>: "not &lt;!here&gt; that one"' in thread_text(h)
    for call in h.fake.records:
        assert "<!here>" not in json.dumps(call.args), call.method


async def test_a_click_by_someone_who_may_not_decide_is_refused_in_a_line_only_they_see(
    make: Any,
) -> None:
    h: ApprovalHarness = await make([DELETE, DONE])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    for action_id in (APPROVE_ACTION_ID, EDIT_ACTION_ID, DENY_ACTION_ID, ALWAYS_ACTION_ID):
        assert await h.click(action_id, user=STRANGER) == 200
    await eventually(lambda: len(h.ephemerals()) == 4)
    assert set(h.ephemerals()) == {words.decide_refused("asker", "<@U1ADA>")}
    assert {c.args["user"] for c in h.fake.calls("chat.postEphemeral")} == {STRANGER}
    assert h.fake.views == [] and h.ran == [], "nothing decided, no modal opened"
    assert buttons(h.root()), "still waiting"
    assert await h.click(APPROVE_ACTION_ID, user=ADMIN) == 200  # an admin may
    await h.settled()
    assert h.ran == [{"path": "drafts/q3.md"}]
    assert "✅ approved by <@UADMIN>" in thread_text(h)


async def test_the_approvers_policy_admins_and_anyone(make: Any) -> None:
    admins: ApprovalHarness = await make([DELETE, DONE], approvers="admins")
    await admins.ask("Delete the Q3 draft")
    await eventually(waiting(admins.fake))
    assert "only an admin can decide" in message_text(admins.root())
    await admins.click(APPROVE_ACTION_ID, user=ASKER)
    await eventually(lambda: bool(admins.ephemerals()))
    assert admins.ephemerals() == [words.decide_refused("admins")]
    await admins.click(APPROVE_ACTION_ID, user=ADMIN)
    await admins.settled()
    assert admins.ran == [{"path": "drafts/q3.md"}]


async def test_an_admins_policy_without_admins_is_reported_at_start(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="adapters.slack.bot"):
        await make([], approvers="admins", admin_users=frozenset())
    assert any("nobody can approve" in r.getMessage() for r in caplog.records)


async def test_anyone_may_decide_when_the_policy_says_so(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE, DONE], approvers="anyone")
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    assert "anyone here can decide" in message_text(h.root())
    await h.click(APPROVE_ACTION_ID, user=STRANGER)
    await h.settled()
    assert h.ran == [{"path": "drafts/q3.md"}] and h.ephemerals() == []
    assert "✅ approved by <@U2BOB>" in thread_text(h)


async def test_a_click_after_the_decision_is_told_the_action_no_longer_waits(make: Any) -> None:
    h: ApprovalHarness = await make(
        [DELETE, Turn(DONE, delay=0.3)]  # the run is still going when the late click lands
    )
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    waiting_root = snapshot(h.root())
    await h.click(APPROVE_ACTION_ID, user=ASKER)
    await eventually(lambda: bool(h.ran))
    await h.click(DENY_ACTION_ID, user=ADMIN, message=waiting_root)  # a stale copy of it
    await eventually(lambda: bool(h.ephemerals()))
    assert h.ephemerals() == [words.DECISION_GONE]
    await h.settled()
    assert h.fake.views == [] and "✅ approved by <@U1ADA>" in thread_text(h)


# ---- no decision, Stop, and remembering -------------------------------------------------------


async def test_no_decision_in_time_is_a_denial_said_in_the_message_and_the_thread(
    make: Any,
) -> None:
    h: ApprovalHarness = await make(
        [DELETE, "Thought: Nobody answered.\nAction: finish[Not deleted.]"], approval_timeout=0.6
    )
    started = time.monotonic()
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    await h.settled()
    assert time.monotonic() - started >= 0.6
    assert h.ran == []
    assert "No decision within 0.6 s, so the action was not run." in prompts(h, 1)
    root = h.root()
    assert not buttons(root)
    assert "⌛ no decision in 0.6 s: denied" in message_text(root)
    assert "*Approval:* ⌛ no decision in 0.6 s: denied" in thread_text(h)
    assert "Not deleted." in message_text(root)


async def test_stop_works_while_waiting_for_a_decision(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    (run_id,) = h.bot.running
    pressed = time.monotonic()
    await h.press_stop(f"{run_id}:{ASKER}", user=ASKER)
    await h.settled()
    assert time.monotonic() - pressed < 10.0, "not left to the 30 s approval timeout"
    root = h.root()
    assert "Stopped by <@U1ADA> after step 1." in message_text(root)
    assert not buttons(root) and h.ran == []
    assert h.bot.broker is not None and h.bot.broker.pending((run_id, 1, 0)) is None
    h.model.assert_complete()


async def test_allow_in_this_conversation_is_not_asked_again_in_the_thread(make: Any) -> None:
    h: ApprovalHarness = await make([DELETE, DONE, DELETE, "Thought: ok.\nAction: finish[Again.]"])
    await h.ask("Delete the Q3 draft")
    await eventually(waiting(h.fake))
    await h.click(ALWAYS_ACTION_ID, user=ASKER)
    await h.settled()
    root = h.root()
    assert "✅ approved by <@U1ADA>, and allowed for the rest of the conversation" in thread_text(h)
    follow_up = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": ASKER,
        "ts": "1800000000.1",
        "thread_ts": root.ts,
        "text": f"<@{BOT_USER_ID}> and once more?",
    }
    await h.event(follow_up, event_id="EvAgain")
    await h.settled()
    assert h.ran == [{"path": "drafts/q3.md"}] * 2, "the second run was not asked"
    (answer,) = [m for m in h.fake.replies(CHANNEL, root.ts) if "Again." in message_text(m)]
    assert approval_versions(answer) == [], "no buttons in the second run"
    assert "✅ allowed for this conversation by <@U1ADA>" in "\n".join(versions_text(answer))
    h.model.assert_complete()


async def test_the_shared_broker_outlives_the_slack_bot(make: Any) -> None:
    """Another platform in the same process may still be waiting on it (App closes it)."""
    decisions = InMemoryDecisions()
    h: ApprovalHarness = await make([], decisions=decisions)
    await h.bot.aclose()
    broker = h.bot.broker
    assert broker is not None
    request = ApprovalRequest("run9", "c", ASKER, 1, 0, "", "files_delete", PATH, True, 5.0, True)
    waiting = asyncio.get_running_loop().create_task(broker(request))
    await eventually(lambda: broker.pending(("run9", 1, 0)) is not None)
    await decisions.publish(("run9", 1, 0), Decision("approve", ADMIN))  # as from elsewhere
    assert (await asyncio.wait_for(waiting, 2.0)).verdict == "approve"


class AwayPending(InMemoryPending):
    """A shared store of pending requests that cannot be reached."""

    async def get(self, key: RequestKey) -> ApprovalRequest | None:
        raise StoreUnavailable("the store is away")


async def test_a_click_that_cannot_look_the_action_up_says_so_and_decides_nothing(
    make: Any,
) -> None:
    channel = InMemoryDecisions()  # one channel, two bots: replicas whose store is away
    runs: ApprovalHarness = await make([DELETE, DONE], decisions=channel)
    elsewhere: ApprovalHarness = await make([], decisions=channel, pending=AwayPending())
    await runs.ask("Delete the Q3 draft")
    await eventually(waiting(runs.fake))
    await elsewhere.click(APPROVE_ACTION_ID, user=ASKER, message=snapshot(runs.root()))
    await eventually(lambda: bool(elsewhere.ephemerals()))
    assert elsewhere.ephemerals() == [
        "I could not look this action up just now; try again in a moment."
    ]
    assert runs.ran == [] and buttons(runs.root())
    await runs.click(APPROVE_ACTION_ID, user=ASKER)  # where the run is, it is known
    await runs.settled()
    assert runs.ran == [{"path": "drafts/q3.md"}]


# ---- replicas sharing one Redis -------------------------------------------------------------


async def test_a_click_on_the_other_replica_decides_the_run(
    make: Any, two_processes: list[RedisStores]
) -> None:
    first, second = two_processes
    runs: ApprovalHarness = await make(
        [DELETE, DONE], decisions=first.decisions, pending=first.pending, runs=first.runs
    )
    elsewhere: ApprovalHarness = await make(
        [], decisions=second.decisions, pending=second.pending, runs=second.runs
    )
    await runs.ask("Delete the Q3 draft")
    await eventually(waiting(runs.fake))
    root = snapshot(runs.root())

    await elsewhere.click(APPROVE_ACTION_ID, user=STRANGER, message=root)
    await eventually(lambda: bool(elsewhere.ephemerals()))
    assert elsewhere.ephemerals() == [words.decide_refused("asker", "<@U1ADA>")]
    assert runs.ran == [], "the replica that got the click refused a stranger"

    await elsewhere.click(EDIT_ACTION_ID, user=ASKER, message=root)
    await eventually(lambda: bool(elsewhere.fake.views))
    (view,) = elsewhere.fake.views
    field_ = next(b for b in view["blocks"] if b.get("block_id") == INPUT_BLOCK)
    assert field_["element"]["initial_value"] == PATH, "the input, read from the shared store"
    status, answer = await elsewhere.submit(
        {INPUT_BLOCK: '{"path": "drafts/q3-old.md"}'}, user=ASKER
    )
    assert (status, answer) == (200, {})
    await eventually(lambda: bool(runs.ran), within=2.0)  # carried across replicas at once
    await runs.settled()
    assert runs.ran == [{"path": "drafts/q3-old.md"}]
    assert "✏️ edited by <@U1ADA>" in thread_text(runs)
    assert not elsewhere.bot.running and elsewhere.model.calls == []
    await elsewhere.click(APPROVE_ACTION_ID, user=ASKER, message=root)  # a stale copy
    await eventually(lambda: len(elsewhere.ephemerals()) == 2)
    assert elsewhere.ephemerals()[-1] == words.DECISION_GONE


async def test_a_bot_whose_tools_need_approval_answers_by_chat_update_even_in_dms(
    make: Any, fake: FakeSlack
) -> None:
    # The approval buttons live in the chat.update message; a native stream has no place
    # for them, so slack.streaming: native (and auto, in DMs) answers by chat.update here.
    h: ApprovalHarness = await make(
        ["Thought: ok\nAction: finish[Nothing to delete.]"], streaming="native"
    )
    event = {
        "type": "message",
        "channel_type": "im",
        "channel": "D1ADA",
        "user": ASKER,
        "text": "hi",
        "ts": "1710000000.000001",
    }
    await h.event(event, event_id="EvDmApproval")
    await h.settled()
    assert not fake.calls("chat.startStream") and not fake.streams
    assert "Nothing to delete." in message_text(h.root("D1ADA"))
