"""Per-step overhead of our ReAct loop versus LangGraph's prebuilt ReAct agent, on the same
streamed work.

Run: ``.venv/bin/python bench/core_overhead.py`` (``--profile`` adds a cProfile of our side).

One run, on every side: 3 model turns (2 tool calls, then the final answer) of realistic
length (each turn's text is 600+ characters: a thought of several sentences, or the answer),
streamed in 8-character chunks, and 2 calls of the same trivial async tool. Nothing sleeps;
one process, one event loop; every streamed piece is consumed by the caller.

- ``ours, text mode``: ``Agent.run`` with the strict ``ScriptedModel``; the reply is ReAct text
  (the thought, then ``Action: calculate[2+2]``), so the StreamParser, the stop cutter, the
  event queue and the trace bookkeeping all run.
- ``ours, tools mode``: the same thought as the reply's content, then a native tool call whose
  JSON arguments stream in 8-character pieces (assembled by index, checked against the
  tool's schema), and the answer as plain content.
- ``LangGraph``: ``create_react_agent`` with a streaming fake chat model that yields the very
  same content in the same 8-character ``AIMessageChunk``s, then the tool call as
  ``tool_call_chunks`` in the same pieces; the graph runs with ``astream(stream_mode=
  "messages")`` so its streaming path runs, and every chunk is consumed.

Each side is warmed up, then timed in alternating batches with ``time.perf_counter``; the
median batch is reported, per step and per KB of streamed reply text. The target: ours at
most 1/20 of LangGraph's time per step, in text and in tools mode.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import json
import platform
import pstats
import statistics
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

from core import prompt
from core.agent import Agent, AgentSettings
from core.events import Finished, ObservationReady
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry

STEPS = 3  # 2 tool steps + finish
TOOL_STEPS = STEPS - 1
TARGET = 20  # ours must be at least this many times cheaper per step
CHUNK = 8
QUESTION = "What is 2+2, checked twice, and why does it matter for the report?"
BATCHES = 7
SECONDS_PER_SIDE = 3.0  # total timed seconds per side, spread over BATCHES

THOUGHTS = [
    "The question asks for a simple sum, but the user also wants it checked twice and "
    "explained, so I should not answer from memory even though the arithmetic looks trivial. "
    "Arithmetic done in my head is where small slips creep in, and the report this feeds "
    "into will be read by people who rely on it. The calculator gives an exact result and "
    "leaves a record in the trace that anyone can verify later. I will start with the "
    "expression exactly as it was asked, two plus two, and look at what comes back before "
    "deciding whether a second check is needed at all.",
    "The calculator returned 4 for two plus two, which matches what I expected. The user "
    "asked for the result to be checked twice, so one confirmation is not enough to satisfy "
    "the request. A good second check uses a different route to the same number rather than "
    "repeating the identical input, because repeating it would only show that the tool is "
    "deterministic. Multiplying four by one should give four again if the first answer was "
    "right, and it exercises the tool with a different operation, which makes the agreement "
    "more meaningful for the report.",
]
ANSWER = (
    "2 + 2 = 4, checked twice with the calculator: first the expression as asked (4), then "
    "an independent route to the same value (4 × 1 = 4). Both checks agree, so the figure is "
    "safe to use. It matters for the report because every later total is built on this sum: "
    "an error here would carry through each table that adds to it, and readers would have no "
    "way to see where it came from. With the two checks recorded in the trace, anyone "
    "reviewing the report can see exactly how the number was obtained and confirm it "
    "themselves in seconds, which is the point of showing the work rather than the answer "
    "alone."
)
EXPRESSIONS = ["2+2", "4*1"]
TEXT_REPLIES = [
    *(f"Thought: {t}\nAction: calculate[{e}]" for t, e in zip(THOUGHTS, EXPRESSIONS, strict=True)),
    f"Thought: Both checks agree.\nAction: finish[{ANSWER}]",
]
TOOL_ARGUMENTS = [json.dumps({"expression": e}) for e in EXPRESSIONS]
TEXT_TURNS = [Turn(text, chunk_size=CHUNK) for text in TEXT_REPLIES]
TOOL_TURNS = [
    *(
        Turn(t, chunk_size=CHUNK, tool_calls=(("calculate", a),))
        for t, a in zip(THOUGHTS, TOOL_ARGUMENTS, strict=True)
    ),
    Turn(ANSWER, chunk_size=CHUNK),
]
STREAMED_CHARS = {
    "ours-text": sum(len(t) for t in TEXT_REPLIES),
    "ours-tools": sum(map(len, THOUGHTS)) + sum(map(len, TOOL_ARGUMENTS)) + len(ANSWER),
}
STREAMED_CHARS["langgraph"] = STREAMED_CHARS["ours-tools"]


async def calculate(expression: str) -> str:
    """Evaluates arithmetic."""
    return "4"


# ---- ours ---------------------------------------------------------------------------------
def our_registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(
        FunctionTool(
            "calculate",
            calculate,
            "Evaluates arithmetic.",
            "calculate[2+2]",
            input_name="expression",
        )
    )
    return tools


TOOLS = our_registry()
TEXT_SETTINGS = AgentSettings()
TOOLS_SETTINGS = AgentSettings(mode="tools")


async def ours_text_once() -> list[Any]:
    agent = Agent(ScriptedModel(list(TEXT_TURNS)), TOOLS, settings=TEXT_SETTINGS)
    return [event async for event in agent.run(QUESTION)]


async def ours_tools_once() -> list[Any]:
    agent = Agent(ScriptedModel(list(TOOL_TURNS)), TOOLS, settings=TOOLS_SETTINGS)
    return [event async for event in agent.run(QUESTION)]


def check_ours(events: list[Any]) -> None:
    done = events[-1]
    assert isinstance(done, Finished) and done.status == "answered", done
    assert done.answer == ANSWER, done.answer
    observations = [e for e in events if isinstance(e, ObservationReady)]
    assert [o.text for o in observations] == ["4"] * TOOL_STEPS and not any(
        o.error for o in observations
    )
    assert [s.action_input for s in done.trace.tool_steps] == EXPRESSIONS
    assert len(done.trace.steps) == STEPS


# ---- LangGraph ----------------------------------------------------------------------------
class StreamingToolModel(BaseChatModel):
    """Streams scripted turns the way an OpenAI-style chat model does: content in chunks, then
    the tool call as ``tool_call_chunks`` (id and name first, arguments in pieces)."""

    step: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-streaming"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("this model only streams")

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        turn = self.step % STEPS
        self.step += 1
        content = THOUGHTS[turn] if turn < TOOL_STEPS else ANSWER
        for start in range(0, len(content), CHUNK):
            piece = content[start : start + CHUNK]
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        if turn < TOOL_STEPS:
            arguments = TOOL_ARGUMENTS[turn]
            head = {"name": "calculate", "args": "", "id": f"call_{turn}", "index": 0}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[head]))
            for start in range(0, len(arguments), CHUNK):
                piece = {"args": arguments[start : start + CHUNK], "index": 0}
                yield ChatGenerationChunk(
                    message=AIMessageChunk(content="", tool_call_chunks=[piece])
                )


def langgraph_agent() -> Any:
    tool = StructuredTool.from_function(
        coroutine=calculate, name="calculate", description="Evaluates arithmetic."
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            StreamingToolModel(), [tool], prompt=prompt.system_prompt(TOOLS, "tools")
        )


LANGGRAPH = langgraph_agent()


async def langgraph_once() -> list[Any]:
    streamed = []
    async for message, _ in LANGGRAPH.astream(
        {"messages": [("user", QUESTION)]}, stream_mode="messages"
    ):
        streamed.append(message)
    return streamed


def check_langgraph(streamed: list[Any]) -> None:
    tool_messages = [m for m in streamed if isinstance(m, ToolMessage)]
    chunks = [m for m in streamed if isinstance(m, AIMessageChunk)]
    assert [m.content for m in tool_messages] == ["4"] * TOOL_STEPS, tool_messages
    text = "".join(str(m.content) for m in chunks)
    assert text == "".join(THOUGHTS) + ANSWER, "every streamed piece arrives"
    calls = [c for m in chunks for c in m.tool_call_chunks]
    assert "".join(c["args"] or "" for c in calls) == "".join(TOOL_ARGUMENTS)


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
    "ours-text": ours_text_once,
    "ours-tools": ours_tools_once,
    "langgraph": langgraph_once,
}
LABELS = {
    "ours-text": "ours, text mode",
    "ours-tools": "ours, tools mode",
    "langgraph": "LangGraph, streamed tool calls",
}


async def measure() -> dict[str, list[float]]:
    """Seconds per run for each side, one figure per batch."""
    check_ours(await ours_text_once())
    check_ours(await ours_tools_once())
    check_langgraph(await langgraph_once())
    runs = {}
    for name, once in SIDES.items():
        seconds = await per_run(once)
        runs[name] = max(5, round(SECONDS_PER_SIDE / BATCHES / seconds))
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
    for _ in range(100):
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
    parser.add_argument("--profile-side", choices=["ours-text", "ours-tools"], default="ours-text")
    parser.add_argument("--profile-runs", type=int, default=2000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    print(versions())
    print(
        f"one run = {STEPS} model turns ({TOOL_STEPS} tool calls + final answer), "
        f"{CHUNK}-character chunks, delay 0; streamed per run: "
        + ", ".join(f"{LABELS[k]} {v:,} characters" for k, v in STREAMED_CHARS.items())
    )
    times = asyncio.run(measure())
    medians = {name: statistics.median(t) for name, t in times.items()}
    theirs = medians["langgraph"]
    print(f"\n{'median of batches':<33}{'µs/run':>10}{'µs/step':>10}{'µs/KB':>9}{'LG/ours':>9}")
    for name, seconds in medians.items():
        per_kb = seconds / (STREAMED_CHARS[name] / 1000)
        shown = "" if name == "langgraph" else f"{theirs / seconds:>8.1f}x"
        print(
            f"{LABELS[name]:<33}{seconds * 1e6:>10.1f}{seconds / STEPS * 1e6:>10.1f}"
            f"{per_kb * 1e6:>9.1f} {shown}"
        )
    budget = theirs / STEPS / TARGET
    print(f"\ntarget: ours <= 1/{TARGET} of LangGraph per step, i.e. <= {budget * 1e6:.1f} µs/step")
    met = {}
    for name in ("ours-text", "ours-tools"):
        ratio = theirs / medians[name]
        paired = statistics.median(
            lg / us for lg, us in zip(times["langgraph"], times[name], strict=True)
        )
        met[name] = ratio >= TARGET
        print(
            f"  {LABELS[name]:<31} ratio {ratio:.1f}x "
            f"(median of per-batch ratios {paired:.1f}x): {'MET' if met[name] else 'NOT MET'}"
        )
    print(f"verdict: {'MET' if all(met.values()) else 'NOT MET'} in both modes")
    if args.profile:
        asyncio.run(profile_ours(args.profile_side, args.profile_runs, args.top))


if __name__ == "__main__":
    main()
