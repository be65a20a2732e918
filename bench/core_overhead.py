"""Per-step cost of our ReAct loop against LangGraph and the OpenAI Agents SDK, each reading
the same streamed replies through its own OpenAI adapter and its own HTTP client.

Run: ``.venv/bin/python bench/core_overhead.py`` (``--source sse`` or ``objects`` for one
case alone; ``--arrival burst`` for a whole reply in one loop turn; ``--profile text|tools``
for a cProfile of our side; ``BENCH_SECONDS=1`` for a quicker, noisier run).

The work, the same on every side: 3 model turns (2 tool steps, then the answer), each reply
600-1,000 characters (a thought of several sentences, or the answer), streamed in chunks of
3-6 characters (mean about 4.6, as providers send tokens), then a usage chunk; 2 calls of the
same trivial async tool. Each chunk is in OpenAI's exact shape. Two cases, timed in the same
interleaved rounds:

- **SSE bytes** (judged): every side gets a real ``openai.AsyncOpenAI`` client over a real
  ``httpx2.AsyncClient`` whose transport (``SSETransport``) serves the replies' SSE bytes,
  one ``data:`` event per loop turn, as a socket delivers them. So every side sends its own
  request and pays its own decoding: ours reads the bytes itself (``core.sse``,
  ``core.openai_reply``); LangChain and the Agents SDK read the SDK's ``AsyncStream``, which
  builds a pydantic ``ChatCompletionChunk`` per chunk.
- **prebuilt chunks** (shown, not judged): nobody decodes. The others'
  ``chat.completions.create`` hands out prebuilt ``ChatCompletionChunk`` objects; ours, which
  never builds those, reads the same chunks as decoded dicts through the same
  ``Reply.translate`` its model uses (``DecodedModel``), with no HTTP at all.

The sides:
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
the machine's load is printed before and after. Targets, on the SSE-bytes case: ours at least
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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, TypedDict

import httpx2
import openai
from openai.types.chat import ChatCompletionChunk

from core import prompt
from core.agent import Agent, AgentSettings
from core.events import Finished, ObservationReady
from core.llm import ModelChunk
from core.openai_model import OpenAIChatModel
from core.openai_reply import Reply
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
SECONDS_PER_SIDE = float(
    os.environ.get("BENCH_SECONDS", "3.0")
)  # timed seconds per side, over ROUNDS
MODEL = "gpt-4.1-mini"
BASE_URL = "http://bench.invalid/v1"
Source = Literal["sse", "objects"]

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


# ---- the replies: SSE bytes, and the SDK's own objects made from the same chunks ---------
def pieces(text: str, rng: random.Random) -> list[str]:
    """``text`` in pieces of 3-6 characters (mean about 4.6): the size of streamed tokens."""
    out, at = [], 0
    while at < len(text):
        size = rng.choice((3, 4, 4, 5, 5, 6))
        out.append(text[at : at + size])
        at += size
    return out


def _chunk(
    delta: dict[str, Any] | None, *, finish: str | None = None, usage: bool = False
) -> dict[str, Any]:
    """One chunk in OpenAI's exact shape (``usage: null`` on each but the last, as OpenAI
    sends when asked to include usage)."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_bench",
        "service_tier": "default",
        "choices": choices,
        "usage": {
            "prompt_tokens": 300,
            "completion_tokens": 200,
            "total_tokens": 500,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        if usage
        else None,
    }


def reply(content: str, call: tuple[int, str] | None, rng: random.Random) -> list[dict[str, Any]]:
    """One streamed reply: the role, the content in pieces, the tool call (id and name
    first, then its arguments in pieces), the finish reason, then the usage chunk."""
    chunks = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [_chunk({"content": p}) for p in pieces(content, rng)]
    if call is not None:
        turn, arguments = call
        head = {
            "index": 0,
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "calculate", "arguments": ""},
        }
        chunks.append(_chunk({"tool_calls": [head]}))
        for piece in pieces(arguments, rng):
            chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    chunks.append(_chunk({}, finish="tool_calls" if call else "stop"))
    chunks.append(_chunk(None, usage=True))
    return chunks


_rng = random.Random(7)
TEXT_REPLIES_CHUNKS = [reply(text, None, _rng) for text in TEXT_REPLIES]
TOOL_REPLIES_CHUNKS = [
    *(
        reply(t, (n, a), _rng)
        for n, (t, a) in enumerate(zip(THOUGHTS, TOOL_ARGUMENTS, strict=True))
    ),
    reply(ANSWER, None, _rng),
]
Replies = list[list[dict[str, Any]]]


def sse_events(chunks: list[dict[str, Any]]) -> list[bytes]:
    """A reply as the provider writes it: one ``data:`` event per chunk, then ``[DONE]``."""
    return [f"data: {json.dumps(c, separators=(',', ':'))}\n\n".encode() for c in chunks] + [
        b"data: [DONE]\n\n"
    ]


class EventStream(httpx2.AsyncByteStream):
    """A response body that hands out one SSE event per loop turn (``per_turn``), as a
    socket does, or the whole reply at once."""

    def __init__(self, events: list[bytes], per_turn: bool) -> None:
        self._events = events if per_turn else [b"".join(events)]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self._events:
            await asyncio.sleep(0)
            yield event


class SSETransport(httpx2.AsyncBaseTransport):
    """Serves the replies' SSE bytes in turn, to whatever client asks (one run = one round
    of the list); below it nothing is shared, above it each side's client does its own
    request and its own decoding."""

    def __init__(self, replies: Replies, per_turn: bool) -> None:
        self._events = [sse_events(chunks) for chunks in replies]
        self._per_turn = per_turn
        self._calls = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(await request.aread())
        assert body.get("stream") is True, "every side streams"
        events = self._events[self._calls % len(self._events)]
        self._calls += 1
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream; charset=utf-8"},
            stream=EventStream(events, self._per_turn),
            request=request,
        )


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


def client_for(replies: Replies, source: Source, per_turn: bool) -> openai.AsyncOpenAI:
    """A real ``AsyncOpenAI`` client answering with ``replies`` in turn.

    ``sse``: over a real ``httpx2.AsyncClient`` whose transport serves the SSE bytes, so the
    client sends its request and decodes the stream its own way. ``objects``: its
    ``chat.completions.create`` hands out prebuilt ``ChatCompletionChunk`` objects, so no
    side decodes anything (and ours, which reads the bytes itself, cannot take this path:
    it reads the same chunks as the SDK's objects' dicts, see ``ours``)."""
    if source == "sse":
        http = httpx2.AsyncClient(transport=SSETransport(replies, per_turn))
        return openai.AsyncOpenAI(api_key="sk-bench", base_url=BASE_URL, http_client=http)
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=BASE_URL)
    prebuilt = [[ChatCompletionChunk.model_validate(c) for c in chunks] for chunks in replies]
    calls = 0

    async def create(**kwargs: Any) -> ChunkStream:
        nonlocal calls
        assert kwargs.get("stream") is True, "every side streams"
        chunks = prebuilt[calls % len(prebuilt)]
        calls += 1
        return ChunkStream(chunks, per_turn)

    client.chat.completions.create = create  # type: ignore[method-assign,assignment]
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


class DecodedModel:
    """Ours in the prebuilt case: ``OpenAIChatModel``'s reading of a reply with the bytes
    already decoded, as the others get the SDK's objects already built: the same
    ``Reply.translate`` over the chunks' dicts, one per loop turn, and nothing of HTTP."""

    name = MODEL
    temperature = 0.0
    max_tokens = None

    def __init__(self, replies: Replies, per_turn: bool) -> None:
        self._replies = replies
        self._per_turn = per_turn
        self._calls = 0

    async def stream(self, messages: Any, *, stop: Any, **_: Any) -> AsyncIterator[ModelChunk]:
        chunks = self._replies[self._calls % len(self._replies)]
        self._calls += 1
        reply = Reply()
        for chunk in chunks:
            if self._per_turn:
                await asyncio.sleep(0)
            for piece in reply.translate(chunk):
                yield piece
        for piece in reply.close():
            yield piece


def our_agent(mode: Literal["text", "tools"], source: Source, per_turn: bool) -> Agent:
    replies = TEXT_REPLIES_CHUNKS if mode == "text" else TOOL_REPLIES_CHUNKS
    model: Any
    if source == "sse":
        model = OpenAIChatModel(model=MODEL, base_url=BASE_URL, api_key="sk-bench")
        model._client = client_for(replies, source, per_turn)
    else:
        model = DecodedModel(replies, per_turn)
    return Agent(model, our_tools(), settings=AgentSettings(mode=mode))


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
    llm = ChatOpenAI(model=MODEL, api_key="sk-bench", base_url=BASE_URL, **kwargs)  # type: ignore[arg-type]
    llm.root_async_client, llm.async_client = client, client.chat.completions
    return llm


def tool_for_langgraph() -> StructuredTool:
    return StructuredTool.from_function(
        coroutine=calculate, name="calculate", description="Evaluates arithmetic."
    )


def langgraph_tools(source: Source, per_turn: bool) -> Any:
    llm = chat_openai(client_for(TOOL_REPLIES_CHUNKS, source, per_turn), stream_usage=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(
            llm, [tool_for_langgraph()], prompt=prompt.system_prompt(_TOOLS_FOR_PROMPT, "tools")
        )


class TextState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    action: tuple[str, str] | None


def langgraph_text(source: Source, per_turn: bool) -> Any:
    """The smallest text-ReAct graph: stream the reply up to the stop sequence, parse the
    action, run the tool, put the observation back, until ``finish``."""
    llm = chat_openai(client_for(TEXT_REPLIES_CHUNKS, source, per_turn), stream_usage=True).bind(
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
def agents_sdk(source: Source, per_turn: bool) -> Callable[[], Awaitable[list[Any]]]:
    sdk.set_tracing_disabled(True)
    model = sdk.OpenAIChatCompletionsModel(
        model=MODEL, openai_client=client_for(TOOL_REPLIES_CHUNKS, source, per_turn)
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


def sides(source: Source, per_turn: bool) -> dict[str, Callable[[], Awaitable[list[Any]]]]:
    return {
        "ours-text": ours(our_agent("text", source, per_turn)),
        "ours-tools": ours(our_agent("tools", source, per_turn)),
        "langgraph-text": langgraph(langgraph_text(source, per_turn), text=True),
        "langgraph-tools": langgraph(langgraph_tools(source, per_turn), text=False),
        "agents": agents_sdk(source, per_turn),
    }


Times = dict[str, list[float]]


async def measure(
    sources: Sequence[Source], per_turn: bool
) -> tuple[dict[Source, Times], dict[str, int]]:
    """Seconds per run for each side of each source, one figure per round; and the events
    each side hands out. Every side of every source runs in every round, one after another."""
    runs_of = {
        (source, name): once for source in sources for name, once in sides(source, per_turn).items()
    }
    first = {key: await once() for key, once in runs_of.items()}
    for source in sources:
        check_ours(first[source, "ours-text"])
        check_ours(first[source, "ours-tools"])
        check_langgraph(first[source, "langgraph-text"], text=True)
        check_langgraph(first[source, "langgraph-tools"], text=False)
        check_agents(first[source, "agents"])
    events = {name: len(items) - (name == "agents") for (_, name), items in first.items()}
    counts = {
        key: max(3, round(SECONDS_PER_SIDE / ROUNDS / await per_run(once)))
        for key, once in runs_of.items()
    }
    times: dict[Source, Times] = {source: {} for source in sources}
    for _ in range(ROUNDS):  # interleaved, so drift (thermal, other load) hits every side
        for key, once in runs_of.items():
            gc.collect()
            seconds = await batch(once, counts[key]) / counts[key]
            times[key[0]].setdefault(key[1], []).append(seconds)
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


def report(times: Times, events: dict[str, int], title: str, *, judged: bool) -> bool:
    print(f"\n{title}; µs per step (a run is {STEPS} steps), over {ROUNDS} interleaved rounds")
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
            verdict = f"  target {TARGETS[kind]:g}x: {'MET' if ok else 'NOT MET'}" if judged else ""
            print(
                f"  {LABELS[mine]:<17} vs {LABELS[other]:<32} {ratios[0]:5.1f}x {median:5.1f}x "
                f"{ratios[-1]:5.1f}x{verdict}"
            )
    return met


async def profile_ours(
    mode: Literal["text", "tools"], source: Source, per_turn: bool, runs: int, top: int
) -> None:
    once = ours(our_agent(mode, source, per_turn))
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
        print(f"\n---- cProfile: ours, {mode} mode, {source}, {runs} runs, by {key} ----")
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
        "--source",
        choices=["both", "sse", "objects"],
        default="both",
        help="what the sides read: SSE bytes through their own HTTP clients (judged), the "
        "SDK's prebuilt objects, or both in the same interleaved rounds (default)",
    )
    parser.add_argument(
        "--profile", choices=["text", "tools"], help="cProfile our side in this mode instead"
    )
    parser.add_argument("--profile-runs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    per_turn = args.arrival == "turn"
    sources: list[Source] = ["sse", "objects"] if args.source == "both" else [args.source]
    if args.profile:
        asyncio.run(profile_ours(args.profile, sources[0], per_turn, args.profile_runs, args.top))
        return

    print(versions())
    print(load())
    for mode, replies in (("text", TEXT_REPLIES_CHUNKS), ("tools", TOOL_REPLIES_CHUNKS)):
        chars = sum(
            len(c["choices"][0]["delta"].get("content") or "")
            for r in replies
            for c in r
            if c["choices"]
        )
        chunks = sum(map(len, replies))
        size = sum(len(e) for r in replies for e in sse_events(r))
        print(
            f"{mode} mode: {STEPS} model turns per run, {chars:,} characters of content in {chunks} chunks, {size:,} bytes of SSE"
        )
    times, events = asyncio.run(measure(sources, per_turn))
    arrival = "one chunk per loop turn" if per_turn else "a whole reply per loop turn (burst)"
    met = True
    for source in sources:
        title = {
            "sse": "SSE bytes, each side through its own HTTP client and decoder (judged)",
            "objects": "prebuilt chunks, no decoding on any side",
        }[source]
        judged = source == "sse"
        ok = report(times[source], events, f"{title}; {arrival}", judged=judged)
        met = ok if judged else met
    print(load())
    if "sse" in sources:
        print(f"verdict (SSE bytes): {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
