"""Per-step overhead of our ReAct loop versus LangGraph's prebuilt ReAct agent.

Run: ``.venv/bin/python bench/core_overhead.py`` (``--profile`` adds a cProfile of our side).

Both sides do the same work per run, in one process and one event loop:
3 model turns (2 tool calls, then the final answer) and 2 calls of the same trivial async
tool that returns a constant. Nothing sleeps.

- Ours: ``Agent.run`` with the strict ``ScriptedModel`` (delay=0, the default 8-char chunks,
  so the StreamParser, the stop cutter, the event queue and the trace bookkeeping all run);
  every event is consumed. A fresh ScriptedModel and Agent per run (their cost is counted).
- LangGraph: ``create_react_agent`` with a fake chat model (``FakeMessagesListChatModel``,
  whose ``bind_tools`` converts the tools to OpenAI schemas and binds them like a real chat
  model does) that returns scripted AIMessages with ``tool_calls``; the same system prompt;
  the graph is built once and ``ainvoke``d per run.

Each side is warmed up, then timed in alternating batches with ``time.perf_counter``; the
median batch is reported. The target from the issue: ours <= 1/20 of LangGraph's per step.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import platform
import pstats
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

from core import prompt
from core.agent import Agent
from core.events import Finished, ObservationReady
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry

STEPS = 3  # 2 tool steps + finish
TOOL_STEPS = STEPS - 1
TARGET = 20  # ours must be at least this many times cheaper per step
QUESTION = "What is 2+2, checked twice?"
BATCHES = 7
SECONDS_PER_SIDE = 3.0  # total timed seconds per side, spread over BATCHES

REPLIES = [
    "Thought: This is arithmetic, I use the calculator.\nAction: calculate[2+2]",
    "Thought: Let me check it once more.\nAction: calculate[4*1]",
    "Thought: Both give the same result.\nAction: finish[2+2 = 4]",
]
STREAMED = [Turn(text) for text in REPLIES]  # Turn's default 8-char chunks, like a stream
WHOLE = [Turn(text, chunk_size=len(text)) for text in REPLIES]  # one chunk per turn


async def calculate(arg: str) -> str:
    """Evaluates arithmetic."""
    return "4"


# ---- ours ---------------------------------------------------------------------------------
def our_registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", calculate, "Evaluates arithmetic.", "calculate[2+2]"))
    return tools


TOOLS = our_registry()


async def ours_once(script: list[Turn] = STREAMED) -> list[Any]:
    agent = Agent(ScriptedModel(list(script)), TOOLS)
    return [event async for event in agent.run(QUESTION)]


async def ours_whole_once() -> list[Any]:
    return await ours_once(WHOLE)


def check_ours(events: list[Any]) -> None:
    done = events[-1]
    assert isinstance(done, Finished) and done.status == "answered", done
    assert done.answer == "2+2 = 4", done.answer
    observations = [e for e in events if isinstance(e, ObservationReady)]
    assert [o.text for o in observations] == ["4"] * TOOL_STEPS and not any(
        o.error for o in observations
    )
    assert len(done.trace.steps) == STEPS


# ---- LangGraph ----------------------------------------------------------------------------
class ScriptedToolCallingModel(FakeMessagesListChatModel):
    """Cycles through scripted AIMessages; binds tools the way real chat models do."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def langgraph_agent() -> Any:
    tool = StructuredTool.from_function(
        coroutine=calculate, name="calculate", description="Evaluates arithmetic."
    )
    responses = [
        AIMessage(
            content="This is arithmetic, I use the calculator.",
            tool_calls=[{"name": "calculate", "args": {"arg": "2+2"}, "id": "call_1"}],
        ),
        AIMessage(
            content="Let me check it once more.",
            tool_calls=[{"name": "calculate", "args": {"arg": "4*1"}, "id": "call_2"}],
        ),
        AIMessage(content="2+2 = 4"),
    ]
    model = ScriptedToolCallingModel(responses=list[BaseMessage](responses))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [tool], prompt=prompt.system_prompt(TOOLS))


LANGGRAPH = langgraph_agent()


async def langgraph_once() -> dict[str, Any]:
    result: dict[str, Any] = await LANGGRAPH.ainvoke({"messages": [("user", QUESTION)]})
    return result


def check_langgraph(result: dict[str, Any]) -> None:
    messages = result["messages"]
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    ai_messages = [m for m in messages if isinstance(m, AIMessage)]
    assert [m.content for m in tool_messages] == ["4"] * TOOL_STEPS, tool_messages
    assert len(ai_messages) == STEPS and messages[-1].content == "2+2 = 4", messages


# ---- timing -------------------------------------------------------------------------------
async def batch(once: Callable[[], Awaitable[Any]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await once()
    return time.perf_counter() - start


async def per_run(once: Callable[[], Awaitable[Any]]) -> float:
    """Warm-up: runs for ~0.3 s and returns the seconds per run."""
    n, elapsed = 1, 0.0
    while elapsed < 0.3:
        n *= 2
        elapsed = await batch(once, n)
    return elapsed / n


SIDES: dict[str, Callable[[], Awaitable[Any]]] = {
    "ours": ours_once,
    "ours-whole": ours_whole_once,
    "langgraph": langgraph_once,
}
LABELS = {
    "ours": "ours, streamed (8-char chunks)",
    "ours-whole": "ours, 1 chunk per turn",
    "langgraph": "LangGraph create_react_agent",
}


async def measure() -> dict[str, list[float]]:
    """Seconds per run for each side, one figure per batch."""
    check_ours(await ours_once())
    check_ours(await ours_whole_once())
    check_langgraph(await langgraph_once())
    runs = {}
    for name, once in SIDES.items():
        seconds = await per_run(once)
        runs[name] = max(10, round(SECONDS_PER_SIDE / BATCHES / seconds))
    times: dict[str, list[float]] = {name: [] for name in SIDES}
    for _ in range(BATCHES):  # interleaved, so drift (thermal, other load) hits every side
        for name, once in SIDES.items():
            gc.collect()
            times[name].append(await batch(once, runs[name]) / runs[name])
    for name in SIDES:
        print(
            f"  {LABELS[name]:<31} {runs[name]:>5} runs x {BATCHES} batches; µs per run "
            f"min {min(times[name]) * 1e6:.1f}, max {max(times[name]) * 1e6:.1f}"
        )
    return times


def versions() -> str:
    names = ["langgraph", "langgraph-prebuilt", "langgraph-checkpoint", "langchain-core"]
    names += ["pydantic", "reactbot"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    impl = platform.python_implementation()
    return f"{impl} {platform.python_version()} ({platform.machine()}); " + ", ".join(found)


async def profile_ours(side: str, runs: int, top: int) -> None:
    once = SIDES[side]
    for _ in range(200):
        await once()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await once()
    profiler.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(key)
        stats.print_stats(top)
        text = out.getvalue()
        print(f"\n---- cProfile: {LABELS[side]}, {runs} runs, by {key} ----")
        print(text[text.index("   ncalls") :].rstrip())  # drop pstats' preamble


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile our side afterwards")
    parser.add_argument(
        "--profile-side",
        choices=["ours", "ours-whole"],
        default="ours",
        help="which of our variants to profile (default: streamed chunks)",
    )
    parser.add_argument("--profile-runs", type=int, default=5000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    print(versions())
    print(f"one run = {STEPS} model turns ({TOOL_STEPS} tool calls + final answer), delay 0")
    times = asyncio.run(measure())
    medians = {name: statistics.median(t) for name, t in times.items()}
    theirs = medians["langgraph"]
    print(f"\n{'median of batches':<33}{'µs/run':>10}{'µs/step':>10}{'LG/ours':>9}")
    for name, seconds in medians.items():
        shown = "" if name == "langgraph" else f"{theirs / seconds:>8.1f}x"
        print(f"{LABELS[name]:<33}{seconds * 1e6:>10.1f}{seconds / STEPS * 1e6:>10.1f} {shown}")
    budget = theirs / STEPS / TARGET
    print(f"\ntarget: ours <= 1/{TARGET} of LangGraph per step, i.e. <= {budget * 1e6:.1f} µs/step")
    met = {}
    for name in ("ours", "ours-whole"):
        ratio = theirs / medians[name]
        paired = statistics.median(
            lg / us for lg, us in zip(times["langgraph"], times[name], strict=True)
        )
        verdict = "MET" if ratio >= TARGET else "NOT MET"
        met[name] = ratio >= TARGET
        print(
            f"  {LABELS[name]:<31} ratio {ratio:.1f}x "
            f"(median of per-batch ratios {paired:.1f}x): {verdict}"
        )
    print(
        f"verdict (streamed, the way real providers deliver replies): "
        f"{'MET' if met['ours'] else 'NOT MET'}"
    )
    if args.profile or not met["ours"]:
        asyncio.run(profile_ours(args.profile_side, args.profile_runs, args.top))


if __name__ == "__main__":
    main()
