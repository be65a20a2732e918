"""Every key a conversation writes expires, except the kinds meant to persist (issue 25 item
6): ``PERSISTENT_KINDS``, the channel's settings and the run registry, which the docs name.

A conversation's turns go through the real answering pipeline on the Redis stores, with what
surfaces write beside it (the event claim, an admin's setting, a vote, an allowance, a file, a
pending approval, the shared update budget); the keys are read while a turn runs (its lock,
run slot, registry, cooldown) and after."""

from __future__ import annotations

from pathlib import Path

from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted as Ask
from adapters.dispatch.checks import Ticket
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, Where
from adapters.policy import Policy
from core.agent import Agent
from core.approval import ApprovalRequest
from core.budgets import TokenBudgets
from core.llm import Usage
from core.scripted import ScriptedModel, Turn
from core.stores import Stores, record_vote
from core.stores.redis import PERSISTENT_KINDS, RedisRateBudget
from core.tools import FunctionTool, ToolRegistry
from core.tools.lookup import Passage
from tests.replies import Reply

ROOT = Path(__file__).resolve().parents[2]


class Seen:
    def __init__(self, stores: Stores, prefix: str) -> None:
        assert stores.shared is not None
        self.client = stores.shared.client
        self.prefix = prefix
        self.ttls: dict[str, set[int]] = {}

    async def look(self) -> None:
        async for key in self.client.scan_iter(match=self.prefix + "*"):
            ttl = await self.client.ttl(key)
            if ttl != -2:  # gone meanwhile
                kind = key.removeprefix(self.prefix).split(":", 1)[0]
                self.ttls.setdefault(kind, set()).add(ttl)


async def test_every_key_a_conversation_writes_expires_or_is_meant_to_persist(
    redis_url: str, redis_prefix: str
) -> None:
    usage = Usage(1200, 80)
    script = [
        Turn("Thought: I should calculate.\nAction: calculate[17*23+4]", usage=usage),
        Turn("Thought: Done.\nFinal Answer: 395", usage=usage),
    ] * 2

    async def calculate(expression: str) -> str:
        await seen.look()  # mid-run: the lock, the run slot, the registry, the cooldown
        return "395"

    stores = Stores.redis(redis_url, prefix=redis_prefix)
    seen = Seen(stores, redis_prefix)
    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", calculate, "arithmetic", "calculate[1+1]"))
    agent = Agent(ScriptedModel(script), tools, stores=stores)
    answering: Answering[str] = Answering(
        agent,
        surface="slack",
        policy=Policy("slack", cooldown_seconds=5),
        stores=stores,
        budgets=TokenBudgets(stores.usage, per_user=1_000_000),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
    )
    await answering.start()
    try:
        await stores.channel_settings.put("slack:T1:C1", "verbosity", "compact")
        for n in range(2):
            assert await stores.claims.claim(f"slack:event:Ev{n}")
            ask = Ask(
                who="U1",
                # an admin passes the cooldown the first question started
                actor=Actor("slack", "U1", "slack:T1:U1", "ada", admin=n == 1),
                at=Where("slack", "channel", "C1", space="T1"),
                place="slack:T1:C1",
                question=f"What is 17*23+4? ({n})",
                ident=f"slack:event:Ev{n}",
            )
            ticket = await answering.admit(ask)
            assert isinstance(ticket, Ticket), ticket
            await answering.answer(ticket, Reply("slack:T1:C1:1.0", {"channel": "C1", "ts": "1.0"}))
        trace = await stores.traces.last("slack:T1:C1:1.0")
        assert trace is not None and trace.answer == "395"
        assert await record_vote(stores.traces, trace.id, "up", "U2")
        await stores.allowances.allow("slack:T1:C1:1.0", "calculate", by="U1")
        await stores.files.add("slack:T1:C1:1.0", [Passage("notes.md", ("Notes",), "text")])
        await stores.pending.put(
            ApprovalRequest(
                trace.id, "slack:T1:C1:1.0", "U1", 1, 0, "t", "calculate", "1", False, 60, True
            )
        )
        assert stores.shared is not None
        budget = RedisRateBudget(
            stores.shared.client, "T1:chat.update", limit=50, prefix=redis_prefix
        )
        assert await budget.take(0) == 0
        await budget.done()
        await seen.look()
    finally:
        await answering.aclose(grace=5)
        await stores.aclose()

    kinds = set(seen.ttls)
    expected = {"history", "trace", "traces", "recent-traces", "event", "cooldown", "runs"}
    expected |= {"lock", "inflight", "inflight-beats", "usage", "channel", "allow", "files"}
    expected |= {"pending", "budget"}
    assert expected <= kinds, expected - kinds
    forever = {kind for kind, ttls in seen.ttls.items() if -1 in ttls}
    assert (
        forever <= PERSISTENT_KINDS == {"channel", "inflight", "inflight-beats", "inflight-steps"}
    )
    assert {"channel", "inflight", "inflight-beats"} <= forever
    # ... and the operator's guide says so, for each of them.
    operations = (ROOT / "docs" / "operations.md").read_text()
    for kind in PERSISTENT_KINDS:
        assert f"`{{prefix}}{kind}:" in operations, kind
