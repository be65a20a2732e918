"""What OpenTelemetry tracing costs a run, and whether every span arrives.

Run: ``.venv/bin/python -m bench.telemetry_overhead``

One run: 3 model turns of 600+ characters streamed in 8-character chunks (2 calculator calls,
then the answer), so 6 spans (``invoke_agent``, 3 ``chat``, 2 ``execute_tool``). Three sides,
timed in batches on one event loop, each side first in turn, median batch reported per run:

- ``off``: no observer (the default);
- ``on``: the real SDK, ``BatchSpanProcessor`` and OTLP/HTTP exporter, sending to a local
  receiver (tests/fakes/otlp_server.py) in a process of its own, as a collector is;
- ``on + content``: the same with ``telemetry.capture_content`` (thoughts, inputs,
  observations and the answer in the spans).

Export runs in the SDK's own thread; what the loop pays is span creation and hand-over, plus
the exporter thread's share of the GIL. After the timed runs the tracer is shut down and the
spans the receiver decoded are counted against the spans made (the SDK's queue holds 2,048:
beyond it, spans are dropped, which is also reported).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from bot.telemetry import Capture, Provider, Telemetry, start_tracing, traces_endpoint
from core.agent import Agent
from core.events import Finished
from core.observe import RunObserver
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry

CHUNK = 8
BATCHES = 9
RUNS_PER_BATCH = 40
SPANS_PER_RUN = 6
THOUGHT = (
    "The question asks for a simple sum, but the user also wants it checked twice and "
    "explained, so I should not answer from memory even though the arithmetic looks trivial. "
    "Arithmetic done in my head is where small slips creep in, and the report this feeds "
    "into will be read by people who rely on it. The calculator gives an exact result and "
    "leaves a record in the trace that anyone can verify later. I will start with the "
    "expression exactly as it was asked, and look at what comes back before deciding."
)
REPLIES = [
    f"Thought: {THOUGHT}\nAction: calculate[2+2]",
    f"Thought: {THOUGHT}\nAction: calculate[4*1]",
    f"Thought: Both checks agree.\nAction: finish[{THOUGHT}]",
]


async def calculate(expression: str) -> str:
    return "4"


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", calculate, "Evaluates arithmetic.", "calculate[2+2]"))
    return tools


async def one_run(tools: ToolRegistry, observers: list[RunObserver]) -> None:
    model = ScriptedModel([Turn(text, chunk_size=CHUNK) for text in REPLIES])
    agent = Agent(model, tools, observers=observers)
    final = await agent.start("What is 2+2, checked twice?", conversation="bench").wait()
    assert isinstance(final, Finished), final


RECEIVER = """
import asyncio, sys
from tests.fakes.otlp_server import FakeOTLP

async def main():
    async with FakeOTLP() as receiver:
        print(receiver.endpoint, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        print(len(receiver.spans), flush=True)

asyncio.run(main())
"""


async def serve_receiver() -> tuple[str, Callable[[], Awaitable[int]]]:
    """The receiver in a process of its own, as a collector is; returns its endpoint and a
    function that stops it and tells how many spans it decoded."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RECEIVER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    endpoint = (await process.stdout.readline()).decode().strip()

    async def stop() -> int:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        count = int((await process.stdout.readline()).decode())
        await process.wait()
        return count

    return endpoint, stop


async def timed(side: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    for _ in range(RUNS_PER_BATCH):
        await side()
    return (time.perf_counter() - started) / RUNS_PER_BATCH


async def main() -> None:
    endpoint, stop_receiver = await serve_receiver()
    tracer, shutdown = start_tracing(traces_endpoint(endpoint))
    demo = Provider("reactbot.demo", in_process=True)
    plain = Telemetry(tracer, demo)
    content = Telemetry(tracer, demo, capture=Capture(lambda text: text))
    tools = registry()
    sides: dict[str, Callable[[], Awaitable[None]]] = {
        "off": lambda: one_run(tools, []),
        "on": lambda: one_run(tools, [plain]),
        "on + content": lambda: one_run(tools, [content]),
    }
    for side in sides.values():  # warm up
        await timed(side)
    traced_runs = 2 * RUNS_PER_BATCH
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for batch in range(BATCHES):
        # Each side in turn goes first: the exporter's thread works in bursts (512 spans).
        for name in names[batch % 3 :] + names[: batch % 3]:
            times[name].append(await timed(sides[name]))
            if name != "off":
                traced_runs += RUNS_PER_BATCH
    await shutdown()
    received = await stop_receiver()

    base = statistics.median(times["off"])
    print(f"one run: 3 model turns ({sum(map(len, REPLIES)):,} characters), 2 tool calls")
    print(f"median of {BATCHES} batches of {RUNS_PER_BATCH} runs each")
    for name, values in times.items():
        median = statistics.median(values)
        extra = "" if name == "off" else f"  (+{(median - base) * 1e6:,.0f} µs per run)"
        print(f"  {name:<13} {median * 1e6:8,.0f} µs per run{extra}")
    made = traced_runs * SPANS_PER_RUN
    print(f"spans made {made:,}, received and decoded {received:,}, lost {made - received:,}")


if __name__ == "__main__":
    asyncio.run(main())
