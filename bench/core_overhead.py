"""Per-step cost of our ReAct loop against LangGraph and the OpenAI Agents SDK, on the same
streamed replies read through each side's real OpenAI adapter.

Run: ``.venv/bin/python bench/core_overhead.py`` (``--arrival burst`` for the old case where a
whole reply is read in one loop turn; ``--profile`` adds a cProfile of our side).

The work, the same on every side: 3 model turns (2 tool steps, then the answer), each reply
600-1,000 characters (a thought of several sentences, or the answer), streamed in chunks of
3-6 characters (mean about 4.6, as providers send tokens), then a usage chunk; 2 calls of the
same trivial async tool. Every side gets a real ``openai.AsyncOpenAI`` client whose
``chat.completions.create`` returns the very same prebuilt ``ChatCompletionChunk`` objects, so
nothing differs below the adapters: what is timed is each library from the SDK's objects up
to its caller. With ``--arrival turn`` (the default) each chunk arrives in its own loop turn,
as it does from a socket; every event a side hands out is consumed by the caller.

- ``ours, text mode``: ``Agent`` with ``OpenAIChatModel``; the reply is ReAct text (the
  thought, then ``Action: calculate[2+2]``), so the StreamParser, the stop cutter, the outbox
  and the trace bookkeeping all run.
- ``ours, tools mode``: the thought as the reply's content, then a native tool call whose JSON
  arguments stream in pieces (assembled by index, checked against the tool's schema).
- ``LangGraph, tools``: ``create_react_agent`` with ``ChatOpenAI``, streamed with
  ``astream(stream_mode="messages")`` so its streaming path runs.
- ``LangGraph, text``: the smallest text-ReAct graph (a model node that streams ``ChatOpenAI``
  with the stop sequence, parses ``Action: name[input]``, a tool node), same stream mode.
- ``Agents SDK``: ``Runner.run_streamed`` with ``OpenAIChatCompletionsModel`` and a
  ``function_tool``, tracing off; every ``stream_events()`` item consumed. It has no text
  mode, so both of our modes are compared with its one.

Each side is warmed up, then timed in interleaved batches, in CPU time (``time.process_time``:
the benchmark is one thread and never sleeps), so drift and other load hit every side alike;
the machine's load is printed. Targets: ours at least
20x cheaper per step than LangGraph and 10x cheaper than the Agents SDK, in both modes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.metadata
import io
import json
import os
import platform
import pstats
import random
import re
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, TypedDict

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.completion_usage import CompletionUsage

from core import prompt
from core.agent import Agent, AgentSettings
from core.events import Finished, ObservationReady
from core.openai_model import OpenAIChatModel
from core.tools import FunctionTool, ToolRegistry

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import agents as sdk
    from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import create_react_agent

STEPS = 3  # 2 tool steps + the answer
TOOL_STEPS = STEPS - 1
TARGETS = {"langgraph": 20.0, "agents": 10.0}  # ours must be this many times cheaper per step
QUESTION = "What is 2+2, checked twice, and why does it matter for the report?"
ROUNDS = 9
SECONDS_PER_SIDE = 3.0  # total timed seconds per side, spread over ROUNDS
MODEL = "gpt-4.1-mini"

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
ACTION = re.compile(r"Action:\s*(\w+)\[(.*)\]\s*$", re.DOTALL)


# ---- the replies, as the SDK's own objects ------------------------------------------------
def pieces(text: str, rng: random.Random) -> list[str]:
    """``text`` in pieces of 3-6 characters (mean about 4.6): the size of streamed tokens."""
    out, at = [], 0
    while at < len(text):
        size = rng.choice((3, 4, 4, 5, 5, 6))
        out.append(text[at : at + size])
        at += size
    return out


def _chunk(delta: ChoiceDelta | None, *, finish: str | None = None, usage: bool = False) -> Any:
    choices = [] if delta is None else [Choice(index=0, delta=delta, finish_reason=finish)]  # type: ignore[arg-type]
    return ChatCompletionChunk(
        id="chatcmpl-bench",
        object="chat.completion.chunk",
        created=1_700_000_000,
        model=MODEL,
        choices=choices,
        usage=CompletionUsage(prompt_tokens=300, completion_tokens=200, total_tokens=500)
        if usage
        else None,
    )


def reply(content: str, call: tuple[int, str] | None, rng: random.Random) -> list[Any]:
    """One streamed reply: the role, the content in pieces, the tool call (id and name
    first, then its arguments in pieces), the finish reason, then the usage chunk."""
    chunks = [_chunk(ChoiceDelta(role="assistant", content=""))]
    chunks += [_chunk(ChoiceDelta(content=p)) for p in pieces(content, rng)]
    if call is not None:
        turn, arguments = call
        head = ChoiceDeltaToolCall(
            index=0,
            id=f"call_{turn}",
            type="function",
            function=ChoiceDeltaToolCallFunction(name="calculate", arguments=""),
        )
        chunks.append(_chunk(ChoiceDelta(tool_calls=[head])))
        for piece in pieces(arguments, rng):
            function = ChoiceDeltaToolCallFunction(arguments=piece)
            chunks.append(
                _chunk(ChoiceDelta(tool_calls=[ChoiceDeltaToolCall(index=0, function=function)]))
            )
    chunks.append(_chunk(ChoiceDelta(), finish="tool_calls" if call else "stop"))
    chunks.append(_chunk(None, usage=True))
    return chunks


_rng = random.Random(7)
TEXT_STREAMS = [reply(text, None, _rng) for text in TEXT_REPLIES]
TOOL_STREAMS = [
    *(
        reply(t, (n, a), _rng)
        for n, (t, a) in enumerate(zip(THOUGHTS, TOOL_ARGUMENTS, strict=True))
    ),
    reply(ANSWER, None, _rng),
]


class ChunkStream:
    """What ``AsyncCompletions.create(stream=True)`` returns, reduced to what the adapters
    use: async iteration, ``async with`` and ``close``. With ``per_turn`` each chunk waits
    for the next loop turn, as chunks read from a socket do."""

    def __init__(self, chunks: Sequence[Any], per_turn: bool) -> None:
        self._chunks = iter(chunks)
        self._per_turn = per_turn

    def __aiter__(self) -> ChunkStream:
        return self

    async def __anext__(self) -> Any:
        if self._per_turn:
            await asyncio.sleep(0)
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> ChunkStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._chunks = iter(())


def client_for(streams: list[list[Any]], per_turn: bool) -> openai.AsyncOpenAI:
    """A real ``AsyncOpenAI`` client whose chat completions come from ``streams``, in turn:
    the first call gets the first reply, and so on round the list (one run = one round)."""
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url="http://bench.invalid/v1")
    calls = 0

    async def create(**kwargs: Any) -> ChunkStream:
        nonlocal calls
        assert kwargs.get("stream") is True, "every side streams"
        chunks = streams[calls % len(streams)]
        calls += 1
        return ChunkStream(chunks, per_turn)

    client.chat.completions.create = create  # type: ignore[method-assign]
    return client


async def calculate(expression: str) -> str:
    """Evaluates arithmetic."""
    return "4"


# ---- ours ---------------------------------------------------------------------------------
def our_tools() -> ToolRegistry:
    """The one tool every side has, as ours registers it (its prompt is every side's too)."""
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


def our_agent(mode: Literal["text", "tools"], per_turn: bool) -> Agent:
    tools = our_tools()
    model = OpenAIChatModel(model=MODEL, base_url="http://bench.invalid/v1", api_key="sk-bench")
    model._client = client_for(TEXT_STREAMS if mode == "text" else TOOL_STREAMS, per_turn)
    return Agent(model, tools, settings=AgentSettings(mode=mode))


def ours(agent: Agent) -> Callable[[], Awaitable[list[Any]]]:
    async def once() -> list[Any]:
        return [event async for event in agent.run(QUESTION)]

    return once


def check_ours(events: list[Any]) -> None:
    done = events[-1]
    assert isinstance(done, Finished) and done.status == "answered", done
    assert done.answer == ANSWER, done.answer
    observations = [e for e in events if isinstance(e, ObservationReady)]
    assert [o.text for o in observations] == ["4"] * TOOL_STEPS
    assert [s.action_input for s in done.trace.tool_steps] == EXPRESSIONS
    assert len(done.trace.steps) == STEPS


# ---- LangGraph ----------------------------------------------------------------------------
def chat_openai(client: openai.AsyncOpenAI, **kwargs: Any) -> ChatOpenAI:
    llm = ChatOpenAI(model=MODEL, api_key="sk-bench", base_url="http://bench.invalid/v1", **kwargs)  # type: ignore[arg-type]
    llm.root_async_client, llm.async_client = client, client.chat.completions
    return llm


def tool_for_langgraph() -> StructuredTool:
    return StructuredTool.from_function(
        coroutine=calculate, name="calculate", description="Evaluates arithmetic."
    )


def langgraph_tools(per_turn: bool) -> Any:
    llm = chat_openai(client_for(TOOL_STREAMS, per_turn), stream_usage=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            llm, [tool_for_langgraph()], prompt=prompt.system_prompt(_TOOLS_FOR_PROMPT, "tools")
        )


class TextState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    action: tuple[str, str] | None


def langgraph_text(per_turn: bool) -> Any:
    """The smallest text-ReAct graph: stream the reply up to the stop sequence, parse the
    action, run the tool, put the observation back, until ``finish``."""
    llm = chat_openai(client_for(TEXT_STREAMS, per_turn), stream_usage=True).bind(
        stop=["\nObservation:"]
    )
    tool = tool_for_langgraph()

    async def think(state: TextState) -> dict[str, Any]:
        message = None
        async for chunk in llm.astream(state["messages"]):
            message = chunk if message is None else message + chunk
        assert message is not None
        found = ACTION.search(str(message.content))
        return {"messages": [message], "action": (found[1], found[2]) if found else None}

    async def act(state: TextState) -> dict[str, Any]:
        assert state["action"] is not None
        _, argument = state["action"]
        result = await tool.ainvoke({"expression": argument})
        return {"messages": [("user", f"Observation: {result}")], "action": None}

    def route(state: TextState) -> str:
        action = state["action"]
        return END if action is None or action[0] == "finish" else "act"

    graph = StateGraph(TextState)
    graph.add_node("think", think)
    graph.add_node("act", act)
    graph.add_edge(START, "think")
    graph.add_conditional_edges("think", route, ["act", END])
    graph.add_edge("act", "think")
    return graph.compile()


def langgraph(graph: Any, text: bool) -> Callable[[], Awaitable[list[Any]]]:
    start: dict[str, Any] = {"messages": [("user", QUESTION)]}
    if text:
        start["action"] = None

    async def once() -> list[Any]:
        return [item async for item in graph.astream(start, stream_mode="messages")]

    return once


def check_langgraph(items: list[Any], text: bool) -> None:
    messages = [message for message, _ in items]
    chunks = [m for m in messages if isinstance(m, AIMessageChunk)]
    streamed = "".join(str(m.content) for m in chunks)
    if text:
        assert streamed == "".join(TEXT_REPLIES), "every streamed piece arrives"
        return
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == ["4"] * TOOL_STEPS
    assert streamed == "".join(THOUGHTS) + ANSWER, "every streamed piece arrives"
    calls = [c for m in chunks for c in m.tool_call_chunks]
    assert "".join(c["args"] or "" for c in calls) == "".join(TOOL_ARGUMENTS)


# ---- the OpenAI Agents SDK ----------------------------------------------------------------
def agents_sdk(per_turn: bool) -> Callable[[], Awaitable[list[Any]]]:
    sdk.set_tracing_disabled(True)
    model = sdk.OpenAIChatCompletionsModel(
        model=MODEL, openai_client=client_for(TOOL_STREAMS, per_turn)
    )
    agent = sdk.Agent(
        name="bench",
        instructions=prompt.system_prompt(_TOOLS_FOR_PROMPT, "tools"),
        model=model,
        tools=[sdk.function_tool(calculate)],
    )

    async def once() -> list[Any]:
        result = sdk.Runner.run_streamed(agent, QUESTION, max_turns=STEPS + 2)
        events = [event async for event in result.stream_events()]
        events.append(result.final_output)
        return events

    return once


def check_agents(events: list[Any]) -> None:
    assert events[-1] == ANSWER, events[-1]
    outputs = [e for e in events if getattr(e, "name", "") == "tool_output"]
    assert [e.item.output for e in outputs] == ["4"] * TOOL_STEPS, outputs


_TOOLS_FOR_PROMPT = our_tools()


# ---- timing -------------------------------------------------------------------------------
async def batch(once: Callable[[], Awaitable[Any]], n: int) -> float:
    """CPU seconds for ``n`` runs: what this process spent, not what other load took from it
    (the whole benchmark is one thread, and nothing in it sleeps)."""
    start = time.process_time()
    for _ in range(n):
        await once()
    return time.process_time() - start


async def per_run(once: Callable[[], Awaitable[Any]]) -> float:
    """Warm-up: runs for ~0.3 s and returns the seconds per run."""
    n, elapsed = 1, 0.0
    while elapsed < 0.3:
        n *= 2
        elapsed = await batch(once, n)
    return elapsed / n


LABELS = {
    "ours-text": "ours, text mode",
    "ours-tools": "ours, tools mode",
    "langgraph-text": "LangGraph, text ReAct graph",
    "langgraph-tools": "LangGraph, create_react_agent",
    "agents": "Agents SDK, Runner.run_streamed",
}
PAIRS = {  # which of theirs each of ours is set against
    "ours-text": {"langgraph": "langgraph-text", "agents": "agents"},
    "ours-tools": {"langgraph": "langgraph-tools", "agents": "agents"},
}


def sides(per_turn: bool) -> dict[str, Callable[[], Awaitable[list[Any]]]]:
    return {
        "ours-text": ours(our_agent("text", per_turn)),
        "ours-tools": ours(our_agent("tools", per_turn)),
        "langgraph-text": langgraph(langgraph_text(per_turn), text=True),
        "langgraph-tools": langgraph(langgraph_tools(per_turn), text=False),
        "agents": agents_sdk(per_turn),
    }


async def measure(per_turn: bool) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds per run for each side, one figure per round; and the events each hands out."""
    runs_of = sides(per_turn)
    first = {name: await once() for name, once in runs_of.items()}
    check_ours(first["ours-text"])
    check_ours(first["ours-tools"])
    check_langgraph(first["langgraph-text"], text=True)
    check_langgraph(first["langgraph-tools"], text=False)
    check_agents(first["agents"])
    events = {name: len(items) - (name == "agents") for name, items in first.items()}
    counts = {
        name: max(3, round(SECONDS_PER_SIDE / ROUNDS / await per_run(once)))
        for name, once in runs_of.items()
    }
    times: dict[str, list[float]] = {name: [] for name in runs_of}
    for _ in range(ROUNDS):  # interleaved, so drift (thermal, other load) hits every side
        for name, once in runs_of.items():
            gc.collect()
            times[name].append(await batch(once, counts[name]) / counts[name])
    return times, events


def versions() -> str:
    names = ["openai", "langgraph", "langgraph-prebuilt", "langchain-core", "langchain-openai"]
    names += ["openai-agents", "pydantic", "reactbot"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    impl = platform.python_implementation()
    return f"{impl} {platform.python_version()} ({platform.machine()}); " + ", ".join(found)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def report(times: dict[str, list[float]], events: dict[str, int], arrival: str) -> bool:
    print(
        f"\narrival: {arrival}; µs per step (a run is {STEPS} steps), over {ROUNDS} interleaved rounds"
    )
    print(f"{'':<33}{'min':>9}{'median':>9}{'max':>9}{'events/run':>12}")
    for name, t in times.items():
        per_step = sorted(x / STEPS * 1e6 for x in t)
        print(
            f"{LABELS[name]:<33}{per_step[0]:>9.1f}{statistics.median(per_step):>9.1f}"
            f"{per_step[-1]:>9.1f}{events[name]:>12}"
        )
    print("\nhow many times cheaper per step ours is (per-round ratios: min / median / max)")
    met = True
    for mine, theirs in PAIRS.items():
        for kind, other in theirs.items():
            ratios = sorted(b / a for a, b in zip(times[mine], times[other], strict=True))
            median = statistics.median(ratios)
            ok = median >= TARGETS[kind]
            met &= ok
            print(
                f"  {LABELS[mine]:<17} vs {LABELS[other]:<32} {ratios[0]:5.1f}x {median:5.1f}x "
                f"{ratios[-1]:5.1f}x  target {TARGETS[kind]:g}x: {'MET' if ok else 'NOT MET'}"
            )
    return met


async def profile_ours(mode: Literal["text", "tools"], per_turn: bool, runs: int, top: int) -> None:
    once = ours(our_agent(mode, per_turn))
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
        print(f"\n---- cProfile: ours, {mode} mode, {runs} runs, by {key} ----")
        print(text[text.index("   ncalls") :].rstrip())  # drop pstats' preamble


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--arrival",
        choices=["turn", "burst"],
        default="turn",
        help="each chunk in its own loop turn (default), or a whole reply in one",
    )
    parser.add_argument(
        "--profile", choices=["text", "tools"], help="cProfile our side in this mode instead"
    )
    parser.add_argument("--profile-runs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    per_turn = args.arrival == "turn"
    if args.profile:
        asyncio.run(profile_ours(args.profile, per_turn, args.profile_runs, args.top))
        return

    print(versions())
    print(load())
    chars = {
        "text": sum(
            len(c.choices[0].delta.content or "") for s in TEXT_STREAMS for c in s if c.choices
        ),
        "tools": sum(
            len(c.choices[0].delta.content or "") for s in TOOL_STREAMS for c in s if c.choices
        ),
    }
    counts = {"text": sum(map(len, TEXT_STREAMS)), "tools": sum(map(len, TOOL_STREAMS))}
    print(
        f"one run = {STEPS} model turns ({TOOL_STEPS} tool calls + the answer); streamed per run: "
        f"text {chars['text']:,} characters in {counts['text']} chunks, tools "
        f"{chars['tools']:,} characters in {counts['tools']} chunks (tool-call arguments included)"
    )
    times, events = asyncio.run(measure(per_turn))
    met = report(
        times,
        events,
        "one chunk per loop turn" if per_turn else "a whole reply per loop turn (burst)",
    )
    print(load())
    print(f"verdict: {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
