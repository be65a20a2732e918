"""The run observer seam: what metrics and telemetry are told about a run, and that a
broken observer never changes how a run ends."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core.agent import Agent
from core.events import FinalEvent, Finished
from core.llm import Usage
from core.observe import ModelRequest
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry
from core.trace import Trace


class Recorder:
    """Writes down every call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.requests: list[ModelRequest] = []

    def start(self, trace: Trace) -> Recorder:
        self.calls.append(("start", trace.question))
        return self

    def model_call(self, step: int, model: str, request: ModelRequest) -> Recorder:
        self.calls.append(("model", step, model))
        self.requests.append(request)
        return self

    def response(self, id: str, model: str) -> None:
        self.calls.append(("response", id, model))

    def first_chunk(self) -> None:
        self.calls.append(("first",))

    def chunk(self, usage: Usage | None, finish: str | None) -> None:
        self.calls.append(("chunk", usage.prompt_tokens if usage else None, finish))

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> Recorder:
        self.calls.append(("tool", step, call_id, name, input, description))
        return self

    def end(self, *args: object) -> None:
        first = args[0]
        if isinstance(first, (Finished,)) or hasattr(first, "trace"):
            self.calls.append(("run end", type(first).__name__))
        elif len(args) == 2:
            self.calls.append(("tool end", args[0], args[1]))
        else:
            self.calls.append(("model end", None if first is None else type(first).__name__))


def make(model: ScriptedModel, *observers: object) -> Agent:
    tools = ToolRegistry()

    async def calculate(arg: str) -> str:
        return {"6*7": "42", "2*3": "6"}.get(arg, "2")

    tools.add(FunctionTool("calculate", calculate, "Evaluates arithmetic.", "calculate[2+2]"))
    return Agent(model, tools, observers=observers)  # type: ignore[arg-type]


async def test_an_observer_sees_each_model_call_tool_call_and_the_end() -> None:
    model = ScriptedModel(
        [
            Turn("Thought: multiply.\nAction: calculate[6*7]", usage=Usage(10, 5)),
            Turn("Thought: done.\nAnswer: 42", finish="stop"),
        ]
    )
    seen = Recorder()
    final = await make(model, seen).start("6*7?").wait()
    assert isinstance(final, Finished)
    assert seen.calls[0] == ("start", "6*7?")
    assert ("model", 1, model.name) in seen.calls and ("model", 2, model.name) in seen.calls
    assert seen.calls.count(("first",)) == 2
    assert ("chunk", 10, None) in seen.calls and ("chunk", None, "stop") in seen.calls
    assert ("tool", 1, None, "calculate", "6*7", "Evaluates arithmetic.") in seen.calls
    # the text mode's stop sequence; a scripted model says nothing of its sampling
    assert seen.requests[0] == ModelRequest(stop=("\nObservation:",))
    assert ("tool end", "42", False) in seen.calls
    assert seen.calls.count(("model end", None)) == 2
    assert seen.calls[-1] == ("run end", "Finished")
    # the tool ran between the two model calls
    order = [c[0] for c in seen.calls]
    assert order.index("tool") > order.index("model end")


class Broken:
    def start(self, trace: Trace) -> Broken:
        return self

    def model_call(self, step: int, model: str, request: object) -> Broken:
        raise RuntimeError("observer bug")

    def tool_call(self, *args: object) -> Broken:
        raise RuntimeError("observer bug")

    def end(self, final: FinalEvent) -> None:
        raise RuntimeError("observer bug")


async def test_a_broken_observer_is_logged_once_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(["Thought: multiply.\nAction: calculate[2*3]", "Answer: 6"])
    seen = Recorder()
    with caplog.at_level(logging.ERROR):
        final = await make(model, Broken(), seen).start("2*3?").wait()
    assert isinstance(final, Finished) and final.answer == "6"
    assert seen.calls[-1] == ("run end", "Finished"), "the other observer still sees it all"
    assert len([r for r in caplog.records if "run observer failed" in r.message]) == 1


async def test_a_stopped_run_ends_its_open_calls() -> None:
    model = ScriptedModel([Turn("Thought: wait.\nAction: calculate[1+1]", delay=5.0)])
    seen = Recorder()
    run = make(model, seen).start("slow")
    await asyncio.sleep(0.1)
    run.cancel("someone")
    await run.wait()
    assert ("model end", "CancelledError") in seen.calls
    assert seen.calls[-1] == ("run end", "Cancelled")


async def test_a_tool_stopped_mid_call_is_ended_as_cancelled() -> None:
    tools = ToolRegistry()

    async def slow(arg: str) -> str:
        await asyncio.sleep(5)
        return "late"

    tools.add(FunctionTool("slow", slow, "Takes its time.", "slow[x]"))
    seen = Recorder()
    agent = Agent(ScriptedModel(["Thought: wait.\nAction: slow[x]"]), tools, observers=[seen])
    run = agent.start("slow tool")
    await asyncio.sleep(0.2)
    run.cancel("someone")
    await run.wait()
    assert ("tool end", "cancelled", True) in seen.calls
    assert seen.calls[-1] == ("run end", "Cancelled")
