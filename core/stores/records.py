"""What the stores keep and pass between processes: an approval request and its decision,
the budget lines a run holds, and the record of a run in flight.

Plain values with no store behind them (``core.stores.protocols`` names the stores that
carry them); ``core.approval``, ``core.budgets`` and the stores import them from here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from core.trace import Trace

log = logging.getLogger(__name__)

# ---- approvals ----------------------------------------------------------------------------


Verdict = Literal["approve", "edit", "deny", "always"]
"""``always``: approve, and allow this tool for the rest of the conversation."""

VERDICTS: frozenset[str] = frozenset({"approve", "edit", "deny", "always"})


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    run_id: str
    conversation: str
    asker: str
    step: int
    call: int
    thought: str
    name: str
    input: str
    json_input: bool
    """The input is a JSON object (a tool with several arguments): edit it as JSON."""
    timeout: float
    remember: bool
    """"Allow for this conversation" may be offered."""


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    by: str
    input: str | None = None
    """The edited input (``edit`` only)."""
    reason: str = ""
    """Why, when the person said (a denial's reason, from a modal)."""
    by_id: str = ""
    """The platform's id of ``by`` when ``by`` is a display name (Discord)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision | None:
        """A decision read off a channel; None for anything malformed."""
        verdict, by = data.get("verdict"), data.get("by")
        edited, reason = data.get("input"), data.get("reason", "")
        if verdict not in VERDICTS or not isinstance(by, str):
            return None
        if edited is not None and not isinstance(edited, str):
            return None
        if verdict == "edit" and edited is None:
            return None
        by_id = data.get("by_id", "")
        return cls(
            verdict,
            by,
            edited,
            reason if isinstance(reason, str) else "",
            by_id if isinstance(by_id, str) else "",
        )


RequestKey = tuple[str, int, int]
"""``(run_id, step, call)``: which action a decision is for."""

DecisionHandler = Callable[[RequestKey, Decision], None]


def key_of(request: ApprovalRequest) -> RequestKey:
    return (request.run_id, request.step, request.call)


# ---- budget lines -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    """One limit a question is held against: a counter, its limit and the question's
    estimate (the store holds at most what is left)."""

    counter: str
    limit: int
    estimate: int


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a line stood when a hold was refused: counted, and held by the other runs."""

    used: int
    held: int


def up_to_refusal(lines: Sequence[Line], stood: Sequence[Standing]) -> list[Standing]:
    """Where the lines stood, up to the first with nothing left (a store that holds one line
    after another reads no further)."""
    for i, (line, s) in enumerate(zip(lines, stood, strict=False)):
        if s.used + s.held >= line.limit:
            return list(stood[: i + 1])
    return list(stood)


# ---- runs in flight, for crash recovery -----------------------------------------------------

TRACE_SNAPSHOT_CHARS = 256 * 1024
"""A run's record carries its trace so far up to this size: the head (the trace without its
steps) and then its finished steps, as long as they fit (the first ones are kept)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One answer being written, as every process can read it: who runs it (``owner``, one
    id per process), where its message is (``where``, the platform's reference), and its
    trace as of the last heartbeat, so a live process can finish it if the owner dies."""

    run_id: str
    surface: str
    conversation: str
    owner: str
    where: dict[str, str] = field(default_factory=dict)
    asker_key: str = ""
    slot: str = ""
    trace: str = ""
    """The trace's JSON as last written (``TRACE_SNAPSHOT_CHARS`` at most): its head, and
    in a claimed record every step added to it since."""
    place: str = ""
    """The channel whose budget the run spends (``core.budgets``)."""
    held: tuple[str, ...] = ()
    """The budget counters the run holds (its hold's id is ``slot``): whoever finishes the
    run settles them with what its trace spent."""
    asker: str = ""
    """The asker's id on the platform: who may stop the run or decide on its actions, at
    whichever process the press arrives (``adapters.decisions``); with ``where``, the
    run's own word on who asked and where, never a button's."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "run_id": self.run_id,
                "surface": self.surface,
                "conversation": self.conversation,
                "owner": self.owner,
                "where": self.where,
                "asker_key": self.asker_key,
                "slot": self.slot,
                "trace": self.trace,
                "place": self.place,
                "held": list(self.held),
                "asker": self.asker,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord | None:
        try:
            data = json.loads(text)
            return cls(
                run_id=str(data["run_id"]),
                surface=str(data["surface"]),
                conversation=str(data["conversation"]),
                owner=str(data["owner"]),
                where={str(k): str(v) for k, v in dict(data.get("where") or {}).items()},
                asker_key=str(data.get("asker_key", "")),
                slot=str(data.get("slot", "")),
                trace=str(data.get("trace", "")),
                place=str(data.get("place", "")),
                held=tuple(str(c) for c in data.get("held") or ()),
                asker=str(data.get("asker", "")),
            )
        except (ValueError, KeyError, TypeError):
            log.warning("an unreadable run record was skipped")
            return None


def trace_head(trace: Trace) -> str:
    """The trace's JSON without its steps (the question, the models, the status...), or ""
    when even that is beyond ``TRACE_SNAPSHOT_CHARS``: what a run's record holds, its steps
    being added one by one as they finish (``RunRegistry.update``)."""
    text = replace(trace, steps=[]).to_json()
    return text if len(text) <= TRACE_SNAPSHOT_CHARS else ""


def step_json(trace: Trace, index: int) -> str:
    return json.dumps(asdict(trace.steps[index]), ensure_ascii=False)


def with_steps(trace: str, steps: Sequence[str | bytes]) -> str:
    """A record's trace JSON with the steps added since it was written put at the end of its
    own; the record's as it is when a piece is unreadable (an interrupted trace keeps what
    it can)."""
    if not steps or not trace:
        return trace
    try:
        data = json.loads(trace)
        data["steps"] = [*(data.get("steps") or []), *(json.loads(step) for step in steps)]
        return json.dumps(data, ensure_ascii=False)
    except (ValueError, TypeError, AttributeError):
        log.warning("the steps a run left could not be read; its trace is kept without them")
        return trace
