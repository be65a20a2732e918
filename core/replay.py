"""Replaying a trace, and comparing two.

A replay asks a stored question again, with another model, mode or system prompt, and
answers every tool call the original run made from its trace::

    original Trace ──► ReplayingTools ──► Agent (the replay's model, mode, prompt) ──► Run
                          │ a recorded call (same tool, same input): the recorded Observation
                          │ another call: run live (``live=True``), else the run stops there
    finish_replay(run.trace) ──► the replay's Trace: ``replay_of``, ``replayed`` steps, and
                                 why it stopped, if it did

    diff_traces(a, b) ──► TraceDiff: the steps side by side, what differs in each, and the
                          first step where the two runs differ

Nothing here prints; ``bot/trace_commands.py`` renders. Inputs are compared normalised
(``normalise_input``): JSON by value, other text with its runs of white space as one space.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from core.acting import REPEAT_NOTE
from core.agent import EDIT_NOTE, Agent, Run
from core.events import Mode
from core.tools import Attachment, Tool, ToolError, ToolRegistry, ToolResult, needs_approval
from core.tools.schema import MAX_ARGUMENTS, input_name, parameters_of
from core.trace import Trace, TraceStep

CallKey = tuple[str, str]
"""A tool call as replays match it: the lower-cased tool name and the normalised input."""

STOPPED_BY = "the replay"
MODES: tuple[Mode, ...] = ("text", "tools", "json")
INPUT_SHOWN = 200
"""Characters of a call's input quoted in the reason a replay stopped."""


def normalise_input(text: str) -> str:
    """A tool input as replays compare it: JSON (an object, array or string) by value, with
    sorted keys and no spaces; other text stripped, each run of white space one space."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') and len(stripped) <= MAX_ARGUMENTS:
        try:
            value = json.loads(stripped)
            return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read
            pass
    return " ".join(stripped.split())


def call_key(name: str, tool_input: str) -> CallKey:
    return (name.strip().lower(), normalise_input(tool_input))


# ---- recorded calls ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What one tool call gave in the original run."""

    text: str
    error: bool
    sources: tuple[str, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    def result(self) -> ToolResult:
        if self.error:  # the agent writes "Error: <message>" again, as the first time
            raise ToolError(self.text.removeprefix("Error: "))
        return ToolResult(self.text, self.sources, self.attachments)


def recorded_calls(trace: Trace) -> dict[CallKey, list[RecordedCall]]:
    """The tool calls ``trace`` made that ran (denied ones did not), in order, by call."""
    calls: dict[CallKey, list[RecordedCall]] = {}
    for step in trace.steps:
        if not step.action or step.observation is None:
            continue
        if step.approval is not None and step.approval.outcome in ("denied", "timeout"):
            continue  # the tool never ran: nothing to answer from
        calls.setdefault(call_key(step.action, step.action_input or ""), []).append(_recorded(step))
    return calls


def _recorded(step: TraceStep) -> RecordedCall:
    """The tool's own output: the notes the agent put before it are written again when due."""
    text = step.observation or ""
    edited = step.approval is not None and step.approval.outcome == "edited"
    if edited and not step.error and text.startswith(EDIT_NOTE):
        text = text.partition("\n")[2]
    text = text.removeprefix(REPEAT_NOTE)
    attachments = tuple(
        Attachment(a.mime_type, a.data, a.name) for a in step.attachments if a.data is not None
    )
    return RecordedCall(text, bool(step.error), tuple(step.sources), attachments)


# ---- the replaying registry -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayStop:
    """Why a replay stopped before its end: a call it could not answer."""

    name: str
    input: str
    why: Literal["not_recorded", "needs_approval"]

    def describe(self) -> str:
        shown = self.input if len(self.input) <= INPUT_SHOWN else self.input[:INPUT_SHOWN] + "…"
        call = f"{self.name}[{shown}]"
        if self.why == "not_recorded":
            return (
                f"the replay stopped at {call}: the original run made no such call, and live "
                "tools are off"
            )
        return (
            f"the replay stopped at {call}: the tool needs a person's approval, which a replay "
            "does not ask for"
        )


@dataclass(slots=True)
class _ReplayTool:
    """A registry entry that looks like ``inner`` to the agent and the model (same name,
    description, schema) and asks ``ReplayingTools`` for each result. It never needs the
    agent's approval: recorded calls are not run, and live ones are checked by the replay."""

    inner: Tool
    replaying: ReplayingTools
    name: str
    description: str
    example: str
    parameters: dict[str, Any] | None
    input_name: str
    source: str
    approval: bool = False

    async def run(self, arg: str) -> str | ToolResult:
        return await self.replaying.answer(self.inner, arg)


@dataclass(slots=True)
class ReplayingTools:
    """Wraps a ToolRegistry for a replay of ``original``: calls the original run made are
    answered from its trace; others run live with ``live``, else stop the run (``bind``)."""

    tools: ToolRegistry
    original: Trace
    live: bool = False
    approval_tools: frozenset[str] = frozenset()
    """Lower-cased names of tools that need approval (``agent.approval.tools``)."""
    registry: ToolRegistry = field(init=False)
    """What the replay's Agent is given."""
    replayed: set[CallKey] = field(init=False, default_factory=set)
    ran_live: set[CallKey] = field(init=False, default_factory=set)
    stopped: ReplayStop | None = field(init=False, default=None)
    _recorded: dict[CallKey, list[RecordedCall]] = field(init=False)
    _stop: Callable[[], None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._recorded = recorded_calls(self.original)
        self.registry = ToolRegistry()
        for tool in self.tools:
            self.registry.add(
                _ReplayTool(
                    tool,
                    self,
                    tool.name,
                    tool.description,
                    tool.example,
                    parameters_of(tool),
                    input_name(tool),
                    getattr(tool, "source", "built-in"),
                )
            )

    def bind(self, stop: Callable[[], None]) -> None:
        """``stop`` ends the run when a call cannot be answered (``Run.cancel``)."""
        self._stop = stop

    async def answer(self, tool: Tool, arg: str) -> str | ToolResult:
        key = call_key(tool.name, arg)
        recorded = self._recorded.get(key)
        if recorded:
            self.replayed.add(key)
            # the same call made again gets the next recorded answer; the last one repeats
            return (recorded.pop(0) if len(recorded) > 1 else recorded[0]).result()
        if not self.live:
            await self._halt(ReplayStop(tool.name, arg, "not_recorded"))
        if needs_approval(tool, self.approval_tools):
            await self._halt(ReplayStop(tool.name, arg, "needs_approval"))
        self.ran_live.add(key)
        return await tool.run(arg)

    async def _halt(self, stop: ReplayStop) -> NoReturn:
        if self.stopped is None:
            self.stopped = stop
        if self._stop is not None:
            self._stop()
            await asyncio.Event().wait()  # the run's cancellation arrives here
        raise ToolError(stop.describe())  # no run to stop: the model reads why


def start_replay(
    agent: Agent,
    original: Trace,
    replaying: ReplayingTools,
    *,
    mode: Mode | None = None,
) -> Run:
    """Ask ``original``'s question again on ``agent`` (built with ``replaying.registry``),
    in ``mode`` (default: the original's), with the channel persona it ran with, for the
    original's asker in the original's place (a replay repeats their question; who typed
    ``trace replay`` is not who asked it). The run
    keeps no history and stores no trace: ``finish_replay`` completes its Trace, which the
    caller stores."""
    if agent.tools is not replaying.registry:
        raise ValueError("the replay's agent must use the replaying registry")
    chosen = mode or next((m for m in MODES if m == original.mode), "text")
    run = agent.start(
        original.question,
        conversation=original.conversation,
        user=original.user,
        user_id=original.user_id,
        channel=original.channel,
        mode=chosen,
        persona=original.persona,
    )
    run.trace.replay_of = original.id
    replaying.bind(lambda: run.cancel(STOPPED_BY))
    return run


def finish_replay(trace: Trace, replaying: ReplayingTools) -> Trace:
    """Mark the steps answered from the original trace and say why the replay stopped."""
    trace.replay_of = replaying.original.id
    for step in trace.steps:
        if step.action and step.observation is not None:
            step.replayed = call_key(step.action, step.action_input or "") in replaying.replayed
    stop = replaying.stopped
    if stop is not None:
        trace.reason = stop.describe()
        key = call_key(stop.name, stop.input)
        for step in reversed(trace.steps):
            if step.action and call_key(step.action, step.action_input or "") == key:
                if step.observation is None:  # it never ran: say why instead of "stopped"
                    step.error = trace.reason
                break
    return trace


# ---- comparing two traces ---------------------------------------------------------------

MAX_ROWS = 200
"""Step rows a diff holds; beyond, only how many more there were."""

Change = Literal[
    "missing", "kind", "action", "input", "observation", "error", "thought", "answer", "status"
]


@dataclass(frozen=True, slots=True)
class DiffSide:
    """One trace's side of a row: a step (or call), or the final answer (``kind="answer"``)."""

    kind: str
    thought: str = ""
    action: str | None = None
    input: str | None = None
    observation: str | None = None
    error: str | None = None
    replayed: bool = False
    seconds: float = 0.0
    tokens: int | None = None
    answer: str | None = None
    status: str = ""

    @classmethod
    def of_step(cls, step: TraceStep) -> DiffSide:
        return cls(
            kind=step.kind,
            thought=step.thought,
            action=step.action,
            input=step.action_input,
            observation=step.observation,
            error=step.error,
            replayed=step.replayed,
            seconds=step.seconds,
            tokens=step.tokens,
        )

    @classmethod
    def of_answer(cls, trace: Trace) -> DiffSide:
        return cls(kind="answer", answer=trace.answer, status=trace.status, error=trace.reason)


@dataclass(frozen=True, slots=True)
class DiffRow:
    label: str
    """``1``; ``2.2`` for a further call of step 2; ``2'`` for a step asked again after a
    format error; ``answer``."""
    left: DiffSide | None
    right: DiffSide | None
    changes: tuple[Change, ...]

    @property
    def differs(self) -> bool:
        return bool(self.changes)

    @property
    def acts_differently(self) -> bool:
        """Differs in more than the wording of the thought."""
        return any(change != "thought" for change in self.changes)


@dataclass(frozen=True, slots=True)
class TraceDiff:
    left: Trace
    right: Trace
    rows: tuple[DiffRow, ...]
    """The steps in order, then the answer."""
    first: int | None
    """Index in ``rows`` of the first row where the runs act differently (else the first
    where the wording differs); None when they are the same."""
    omitted: int = 0
    """Step rows beyond ``MAX_ROWS``, left out."""

    def summary(self) -> str:
        if self.first is None:
            return "The two runs took the same steps and gave the same answer."
        row = self.rows[self.first]
        where = "the answer" if row.label == "answer" else f"step {row.label}"
        what = ", ".join(_CHANGE_NAMES[c] for c in row.changes)
        return f"First difference at {where}: {what}."


_CHANGE_NAMES: dict[Change, str] = {
    "missing": "only one run has it",
    "kind": "kind of step",
    "action": "tool",
    "input": "tool input",
    "observation": "observation",
    "error": "error",
    "thought": "thought",
    "answer": "answer",
    "status": "outcome",
}


def diff_traces(left: Trace, right: Trace) -> TraceDiff:
    """The two runs side by side, step by step (aligned by step number and call), with what
    differs in each row and the first row that differs."""
    a, b = _keyed(left.steps), _keyed(right.steps)
    keys = sorted(a.keys() | b.keys())
    omitted = max(0, len(keys) - MAX_ROWS)
    rows = []
    for key in keys[:MAX_ROWS]:
        l_side = DiffSide.of_step(a[key]) if key in a else None
        r_side = DiffSide.of_step(b[key]) if key in b else None
        rows.append(DiffRow(_label(key), l_side, r_side, _changes(l_side, r_side)))
    la, ra = DiffSide.of_answer(left), DiffSide.of_answer(right)
    rows.append(DiffRow("answer", la, ra, _changes(la, ra)))
    return TraceDiff(left, right, tuple(rows), _first(rows), omitted)


def _keyed(steps: Iterable[TraceStep]) -> dict[tuple[int, int, int], TraceStep]:
    """Steps by (step number, call, attempt): a step re-asked after a format error keeps
    its number, so the attempt tells the two records apart."""
    keyed: dict[tuple[int, int, int], TraceStep] = {}
    for step in steps:
        attempt = 0
        while (step.index, step.call, attempt) in keyed:
            attempt += 1
        keyed[(step.index, step.call, attempt)] = step
    return keyed


def _label(key: tuple[int, int, int]) -> str:
    index, call, attempt = key
    return f"{index}" + (f".{call + 1}" if call else "") + "'" * min(attempt, 3)


def _changes(left: DiffSide | None, right: DiffSide | None) -> tuple[Change, ...]:
    if left is None or right is None:
        return ("missing",)
    found: list[Change] = []
    if left.kind != right.kind:
        found.append("kind")
    if (left.action or "").strip().lower() != (right.action or "").strip().lower():
        found.append("action")
    if normalise_input(left.input or "") != normalise_input(right.input or ""):
        found.append("input")
    if _text(left.observation) != _text(right.observation):
        found.append("observation")
    if bool(left.error) != bool(right.error):
        found.append("error")
    if _words(left.thought) != _words(right.thought):
        found.append("thought")
    if _text(left.answer) != _text(right.answer):
        found.append("answer")
    if left.status != right.status:
        found.append("status")
    return tuple(found)


def _text(text: str | None) -> str | None:
    return None if text is None else text.strip()


def _words(text: str) -> str:
    return " ".join(text.split())


def _first(rows: list[DiffRow]) -> int | None:
    for i, row in enumerate(rows):
        if row.acts_differently:
            return i
    return next((i for i, row in enumerate(rows) if row.differs), None)
