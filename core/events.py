"""What happens during a run, as plain frozen dataclasses.

Renderers ``match`` on the ``Event`` union and end with ``assert_never``: adding an event
type makes every renderer that forgot it fail type checking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from core.llm import Usage
from core.tools.base import ToolDisplay
from core.trace import Trace

Mode = Literal["text", "tools", "json"]
"""How the model is asked for its steps: ReAct text, native tool calls, or a JSON object."""


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    question: str
    model: str
    max_steps: int
    mode: Mode = "text"


StepKind = Literal["step", "best_effort", "answer"]


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: int
    max_steps: int
    kind: StepKind = "step"
    """``best_effort``: steps ran out, the model is asked for its best answer;
    ``answer``: the answer model writes the final answer from the steps."""

    @property
    def final(self) -> bool:
        """This call writes the final answer; it does not count against ``max_steps``."""
        return self.kind != "step"


@dataclass(frozen=True, slots=True)
class ThoughtDelta:
    step: int
    text: str
    labelled: bool = True
    """False for text the model wrote before any label (``Thought:``, ``Action:``...): a
    thought that omits its label, or a reply with no usable format (a ``FormatRetry`` or an
    ``unformatted`` finish then follows)."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Text from a reasoning model's separate channel (``reasoning_content``, ``<think>``)."""

    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ActionDecided:
    step: int
    name: str
    input: str
    call: int = 0
    """Which of the step's actions: native tool calls in one reply are several (0, 1, ...),
    run concurrently, each answered by the ``ObservationReady`` of the same ``call``."""
    display: ToolDisplay | None = None
    """How the tool shows itself at work (``🔎 Searching``); None: by its name."""


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """The action waits for a person's decision (the tool needs approval)."""

    step: int
    call: int
    name: str
    input: str
    thought: str
    timeout: float
    """Seconds until no decision counts as a denial."""
    json_input: bool = False
    remember: bool = False
    """"Allow for this conversation" may be offered."""
    shown: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)
    """Call once the request is on screen (its buttons visible): the ``timeout`` counts from
    then, not from the request (a message held back by a rate limit loses no time)."""


ApprovalOutcome = Literal["approved", "edited", "denied", "timeout", "allowed"]
"""``allowed``: approved without asking, the conversation allowed the tool earlier."""


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    step: int
    call: int
    outcome: ApprovalOutcome
    by: str | None
    input: str
    """What runs (the edited input after an edit)."""
    reason: str = ""
    remembered: bool = False
    """The person also allowed the tool for the rest of the conversation."""


@dataclass(frozen=True, slots=True)
class ObservationReady:
    step: int
    name: str
    text: str
    """The full observation, as recorded in the trace."""
    error: bool = False
    seconds: float = 0.0
    sources: tuple[str, ...] = ()
    call: int = 0


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class FormatRetry:
    step: int
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class UsageCounted:
    step: int
    usage: Usage


NoticeKind = Literal["waiting", "retrying", "memory", "reading", "info"]
"""``reading``: the question's files are being read (or wait their turn), before step 1."""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the status line should say: waiting for a lock, retrying after a 429..."""

    kind: NoticeKind
    text: str


FinishedStatus = Literal["answered", "refused", "unformatted", "best_effort"]
"""``refused``: the model declined to answer; ``answer`` is its refusal."""


@dataclass(frozen=True, slots=True)
class Finished:
    trace: Trace
    answer: str
    status: FinishedStatus


@dataclass(frozen=True, slots=True)
class Failed:
    trace: Trace
    reason: str
    """One sentence for the user, no secrets."""
    kind: Literal["timeout", "model", "deadline", "internal", "input"]
    """``input``: refused before any model call (a question over the length limit)."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    trace: Trace
    by: str | None = None


Event = (
    RunStarted
    | StepStarted
    | ThoughtDelta
    | ReasoningDelta
    | ActionDecided
    | ApprovalRequested
    | ApprovalDecided
    | ObservationReady
    | AnswerDelta
    | FormatRetry
    | UsageCounted
    | Notice
    | Finished
    | Failed
    | Cancelled
)

FinalEvent = Finished | Failed | Cancelled
