"""How many times a run waits on Redis (issue 46): each round trip costs the bot a write, a
read and the loop's wake-ups, on a fast host a few hundred microseconds of its CPU, and it
was a fifth of the bot's busy time at 80 conversations. The count is pinned so that a change
that adds one says so here.

A question goes through the real answering pipeline on the Redis stores, as a surface sends
it (claimed, admitted, answered with three tool steps, memories recalled, usage counted); a
first question warms the pool, the second is counted. What is counted is what the client
sends: one ``send_packed_command`` is one request written (a pipeline or a transaction is
one), answered by one reply read before the next."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from adapters.attachments import carried
from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted as Ask
from adapters.dispatch.checks import Ticket
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, Where
from adapters.policy import Policy
from core.agent import Agent
from core.budgets import TokenBudgets
from core.file_workers import FileReaders
from core.files import FileLimits
from core.llm import Usage
from core.memories import Memories
from core.memories import Where as Place
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.tools import FunctionTool, ToolRegistry
from tests.replies import Reply

# Per run, in the order a run makes them: the event's claim; its run slot; the channel's
# settings; its files (and their TTL, one pipeline); its entry in the run registry; the
# conversation's lock; its history; the asker's and the channel's memories (one pipeline);
# the history's append; the registry's update with the steps (on a slower run, one per
# step finished); the lock's release; the trace (one transaction); the registry entry's
# end; the day's usage; the run slot given back. 17 before the trace stopped asking SCRIPT
# EXISTS and the two memory reads became one.
ROUND_TRIPS_PER_RUN = 15


def _name(packed: Any, prefix: str) -> str:
    """The first command of what was sent (``*3\\r\\n$3\\r\\nSET\\r\\n$9\\r\\nkey...``) and
    the kind of key it names first, to read a failure by."""
    first = packed[0] if isinstance(packed, list | tuple) else packed
    parts = bytes(first)[:400].decode(errors="replace").split("\r\n")[2::2]
    keys = [p.removeprefix(prefix).split(":", 1)[0] for p in parts[1:] if p.startswith(prefix)]
    return f"{parts[0]} {keys[0]}" if parts and keys else (parts[0] if parts else "?")


async def test_a_run_makes_at_most_its_counted_round_trips(
    redis_url: str, redis_prefix: str
) -> None:
    usage = Usage(1200, 80)
    step = Turn("Thought: I should calculate.\nAction: calculate[17*23+4]", usage=usage)
    script: list[Turn | str] = [
        step,
        step,
        step,
        Turn("Thought: Done.\nFinal Answer: 395", usage=usage),
    ] * 2
    stores = Stores.redis(redis_url, prefix=redis_prefix)
    assert stores.shared is not None
    client = stores.shared.client
    assert isinstance(client, aioredis.Redis)  # one server, not a cluster
    pool = client.connection_pool
    sent: list[str] = []

    class Counted(pool.connection_class):  # type: ignore[name-defined,misc]
        async def send_packed_command(self, command: Any, *args: Any, **kwargs: Any) -> None:
            sent.append(_name(command, redis_prefix))
            await super().send_packed_command(command, *args, **kwargs)

    pool.connection_class = Counted
    readers = FileReaders(max_parallel=1, parse_seconds=5, parse_memory_mb=256)
    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", _calculate, "arithmetic", "calculate[1+1]"))
    agent = Agent(ScriptedModel(script), tools, stores=stores, memories=Memories(stores.memories))
    answering: Answering[str] = Answering(
        agent,
        surface="slack",
        policy=Policy("slack"),
        stores=stores,
        budgets=TokenBudgets(stores.usage),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
        files=carried(stores.files, FileLimits(), readers, platform="slack"),
    )
    await answering.start()
    counted: list[list[str]] = []
    try:
        for n in range(2):
            sent.clear()
            ident = f"slack:event:Ev{n}"
            assert await stores.claims.claim(ident)
            ask = Ask(
                who="U1",
                actor=Actor("slack", "U1", "slack:T1:U1", "ada", admin=True),
                at=Where("slack", "channel", "C1", space="T1"),
                place="slack:T1:C1",
                question=f"What is 17*23+4? ({n})",
                ident=ident,
                where=Place("slack", "T1", "C1", private=False),
            )
            ticket = await answering.admit(ask)
            assert isinstance(ticket, Ticket), ticket
            await answering.answer(ticket, Reply("slack:T1:C1:1.0", {"channel": "C1", "ts": "1.0"}))
            counted.append(list(sent))
        trace = await stores.traces.last("slack:T1:C1:1.0")
        assert trace is not None and trace.answer == "395" and len(trace.steps) == 4
    finally:
        await answering.aclose(grace=5)
        await stores.aclose()
        await readers.aclose()
    warm = counted[1]
    assert len(warm) <= ROUND_TRIPS_PER_RUN, warm
    assert "SCRIPT" not in warm, "a pipeline holding a Script asks SCRIPT EXISTS first"


async def _calculate(expression: str) -> str:
    return "395"
