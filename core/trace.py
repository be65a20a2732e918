"""The Trace: the faithful record of one run. It is the product.

Serialises to JSON (stored, exported, replayed) and renders to Markdown (threads, files).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from core.pricing import format_usd
from core.speech import Heard

Status = Literal[
    "running",
    "answered",
    "refused",
    "unformatted",
    "best_effort",
    "failed",
    "cancelled",
    "interrupted",
]
"""``refused``: the model declined to answer (its refusal is the answer). ``interrupted``: the
process answering died; a live one finished the message and the trace."""
StepKind = Literal["step", "format_error", "final"]

TRACE_VERSION = 1

_HOST = re.compile(r"[a-z0-9_.:-]{1,253}")


@dataclass(slots=True)
class ApprovalRecord:
    """How a person decided on a step's action: who, when, and what they changed."""

    outcome: str
    """``approved``, ``edited``, ``denied``, ``timeout`` or ``allowed`` (earlier, for the
    whole conversation)."""
    by: str | None = None
    at: float = 0.0
    input: str | None = None
    """The input as the model wrote it, when the person edited it (the step's
    ``action_input`` is what ran)."""
    reason: str = ""
    remembered: bool = False
    by_id: str = ""
    """The platform's id of ``by`` (a display name, which anyone may change); "" when the
    surface names people by id already or has none."""

    def describe(self) -> str:
        """``✅ approved by ada`` and the like, for threads, pages and ``trace show``."""
        who = f" by {self.by}" if self.by else ""
        line = {
            "approved": f"✅ approved{who}",
            "edited": f"✏️ edited{who}",
            "denied": f"🚫 denied{who}",
            "timeout": "⌛ no decision in time: denied",
            "allowed": f"✅ allowed for this conversation{who}",
        }.get(self.outcome, self.outcome)
        if self.outcome == "edited" and self.input is not None:
            line += f" (the model wrote: {self.input})"
        if self.remembered:
            line += ", and allowed for the rest of the conversation"
        return line + (f': "{self.reason}"' if self.reason else "")


@dataclass(slots=True)
class Vote:
    """A reader's 👍 or 👎 on the answer (Slack's feedback buttons): one per person, the
    latest kept."""

    value: Literal["up", "down"]
    by: str
    at: float = 0.0


ATTACHMENT_BYTES_PER_TRACE = 2 * 1024 * 1024
"""Base64 characters of tool attachments one trace keeps; beyond, only type and size (the
trace goes to Redis and, as a file, into a chat thread: both have limits)."""


@dataclass(frozen=True, slots=True)
class TraceAttachment:
    """Bytes a tool returned besides its text (an image, audio), kept with its step."""

    mime_type: str
    size: int
    """Decoded bytes."""
    data: str | None = None
    """Base64 as the tool sent it; None when the trace had no room left for it."""
    name: str = ""

    def describe(self) -> str:
        kept = "" if self.data is not None else ", not kept"
        return f"{self.name or 'attachment'} ({self.mime_type}, {self.size:,} bytes{kept})"


def attachment_bytes(trace: Trace) -> int:
    """Characters of attachment data a trace holds."""
    return sum(len(a.data) for s in trace.steps for a in s.attachments if a.data is not None)


_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/_-]")


def decoded_size(data: str) -> int:
    """Bytes that base64 ``data`` stands for: line breaks, padding and a ``data:…,`` prefix
    do not count (an estimate for text that is not base64 at all)."""
    body = data.split(",", 1)[1] if data.startswith("data:") else data
    return len(_NOT_BASE64.sub("", body)) * 3 // 4


_ATTACHMENT_FIELDS = frozenset({"mime_type", "size", "data", "name"})
_APPROVAL_FIELDS = frozenset(f.name for f in fields(ApprovalRecord))


@dataclass(slots=True)
class TraceStep:
    index: int
    kind: StepKind = "step"
    thought: str = ""
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    error: str | None = None
    raw: str = ""
    reasoning: str = ""
    sources: list[str] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    model: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    """What this step's model calls cost in US dollars; None when the model has no price."""
    call: int = 0
    """0 for a model step's (first) action; 1, 2, ... for the further native tool calls made
    in the same reply, recorded as steps of the same ``index`` (they are not model calls)."""
    call_id: str | None = None
    """The provider's id of a native tool call (``tools`` mode)."""
    approval: ApprovalRecord | None = None
    attachments: list[TraceAttachment] = field(default_factory=list)
    replayed: bool = False
    """The observation came from the trace a replay repeats, not from running the tool."""
    refusal: str = ""
    """The model declined in this step, in these words (the provider's refusal field)."""

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@dataclass(slots=True)
class Trace:
    question: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    conversation: str = ""
    user: str = ""
    """The asker as people know them: a display name when the platform gave one, else the
    id (pages show it; anyone may change a display name, so ``user_id`` is kept beside)."""
    user_id: str = ""
    """The asker's id on the platform (the one its buttons name: a Discord or Telegram user
    id, a Slack ``U…``); "" when the surface has none (the terminal)."""
    channel: str = ""
    """Where it was asked, as people call the place (``#general``, a group's title, ``DM``)
    when the platform gave a name; ``conversation`` keeps the ids."""
    models: list[str] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    steps: list[TraceStep] = field(default_factory=list)
    answer: str | None = None
    status: Status = "running"
    reason: str | None = None
    stopped_by: str | None = None
    stopped_by_id: str | None = None
    """The id of whoever stopped the run, beside their (changeable) display name."""
    notices: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    """The sources the answer relied on (the "Sources:" line); ``sources`` keeps them all."""
    mode: str = "text"
    """``text``, ``tools`` or ``json``: how the model was asked for its steps."""
    persona: str = ""
    """The channel's persona in effect (added below the core instructions), if any."""
    system_prompt: str | None = None
    """The system prompt's template when it was not the built-in one (``trace replay
    --prompt``); None: the built-in prompt of ``mode``."""
    replay_of: str | None = None
    """The id of the trace this run replays (``reactbot trace replay``); None for a question
    asked anew."""
    votes: list[Vote] = field(default_factory=list)
    """Readers' feedback on the answer (absent in traces stored before it existed)."""
    voice: Heard | None = None
    """The question was asked by voice: the transcript, the note's length, the speech model
    and what hearing it cost (counted in ``cost_usd``)."""
    version: int = TRACE_VERSION

    def vote(self, value: Literal["up", "down"], by: str, at: float) -> None:
        """Record ``by``'s vote, replacing their earlier one."""
        self.votes = [v for v in self.votes if v.by != by] + [Vote(value, by, at)]

    def feedback_line(self) -> str | None:
        """``👍 2 · 👎 1``, or None when nobody voted."""
        if not self.votes:
            return None
        up = sum(1 for v in self.votes if v.value == "up")
        return f"👍 {up} · 👎 {len(self.votes) - up}"

    # ---- totals -------------------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens or 0 for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens or 0 for s in self.steps)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> float | None:
        """What the run's model calls (and hearing its voice question) cost in US dollars;
        None when nothing had a price."""
        costs = [s.cost_usd for s in self.steps if s.cost_usd is not None]
        if self.voice is not None and self.voice.cost_usd is not None:
            costs.append(self.voice.cost_usd)
        return sum(costs) if costs else None

    @property
    def tool_steps(self) -> list[TraceStep]:
        return [s for s in self.steps if s.action]

    @property
    def sources(self) -> list[str]:
        seen: dict[str, None] = {}
        for step in self.steps:
            for url in step.sources:
                seen.setdefault(url, None)
        return list(seen)

    @property
    def step_count(self) -> int:
        """Model calls that count against ``max_steps`` (format retries and the further
        parallel calls of one reply excluded, and step 0, the earlier messages read first)."""
        return sum(1 for s in self.steps if s.kind != "format_error" and not s.call and s.index)

    # ---- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        step_names = {f.name for f in fields(TraceStep)}
        trace_names = {f.name for f in fields(cls)}
        steps = []
        for raw in data["steps"]:
            fields_ = {k: v for k, v in raw.items() if k in step_names}
            if isinstance(fields_.get("approval"), dict):
                fields_["approval"] = ApprovalRecord(
                    **{k: v for k, v in fields_["approval"].items() if k in _APPROVAL_FIELDS}
                )
            fields_["attachments"] = [
                TraceAttachment(**{k: v for k, v in a.items() if k in _ATTACHMENT_FIELDS})
                for a in fields_.get("attachments") or []
                if isinstance(a, dict)
            ]
            steps.append(TraceStep(**fields_))
        rest = {
            k: v
            for k, v in data.items()
            if k in trace_names and k not in ("steps", "votes", "voice")
        }
        votes = [
            Vote(v["value"], str(v.get("by", "")), float(v.get("at", 0.0)))
            for v in data.get("votes") or []
            if isinstance(v, dict) and v.get("value") in ("up", "down")
        ]
        return cls(steps=steps, votes=votes, voice=_voice(data.get("voice")), **rest)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    # ---- Markdown -----------------------------------------------------------------------
    def to_markdown(self) -> str:
        """Every labelled line is a paragraph of its own (a blank line after each), so any
        Markdown renderer shows them on separate lines."""
        lines = [f"# Trace {self.id}", ""]
        if self.replay_of:
            lines += [f"**Replay of:** {self.replay_of}", ""]
        lines += [f"**Question:** {self.question}", ""]
        if self.voice is not None:
            lines += [f"**Asked by voice:** {voice_summary(self.voice)}", ""]
        if self.persona:
            lines += ["**Channel persona:**", "", _fence(self.persona), ""]
        for step in self.steps:
            lines.extend(render_step_markdown(step))
        lines += [f"**Answer ({self.status}):** {self.answer or '—'}", ""]
        if self.reason:
            lines += [f"**Reason:** {self.reason}", ""]
        if self.stopped_by:
            lines += [f"**Stopped by:** {self.stopped_by}", ""]
        if self.sources:
            lines += ["**Sources:** " + ", ".join(self.sources), ""]
        feedback = self.feedback_line()
        if feedback:
            voters = ", ".join(f"{v.by} {'👍' if v.value == 'up' else '👎'}" for v in self.votes)
            lines += [f"**Feedback:** {feedback} ({voters})", ""]
        lines.append(summary_line(self))
        return "\n".join(lines) + "\n"


def _voice(data: object) -> Heard | None:
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        return None
    seconds, cost = data.get("seconds"), data.get("cost_usd")
    return Heard(
        data["text"],
        float(seconds) if isinstance(seconds, int | float) else None,
        str(data.get("model", "")),
        float(cost) if isinstance(cost, int | float) else None,
    )


def clock(seconds: float | None) -> str:
    """A note's length as people read it: ``0:07``, ``4:05``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = max(0, round(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


def voice_summary(voice: Heard) -> str:
    """``0:07 · whisper-1 · $0.0007``: how a voice question was heard."""
    parts = [clock(voice.seconds), voice.model or "speech model"]
    if voice.cost_usd is not None:
        parts.append(format_usd(voice.cost_usd))
    return " · ".join(parts)


def render_step_markdown(step: TraceStep) -> list[str]:
    """A step's Markdown lines, each block followed by a blank line."""
    head = f"## Step {step.index}" + (f", call {step.call + 1}" if step.call else "")
    if step.kind == "format_error":
        head += " (format error, re-asked)"
    elif step.kind == "final":
        head += " (final answer)"
    meta = f"{step.seconds:.2f} s"
    if step.tokens is not None:
        meta += f" · {step.tokens:,} tokens"
    if step.cost_usd is not None:
        meta += f" · {format_usd(step.cost_usd)}"
    if step.model:
        meta += f" · {step.model}"
    out = [head, "", f"_{meta}_", ""]
    if step.reasoning:
        out += ["**Reasoning:**", "", _fence(step.reasoning), ""]
    if step.thought:
        out += [f"**Thought:** {step.thought}", ""]
    if step.refusal:
        out += [f"**Refusal:** {step.refusal}", ""]
    if step.action:
        out += [f"**Action:** `{step.action}[{step.action_input or ''}]`", ""]
    if step.approval is not None:
        out += [f"**Approval:** {step.approval.describe()}", ""]
    if step.observation is not None:
        label = "**Observation (replayed):**" if step.replayed else "**Observation:**"
        out += [label, "", _fence(step.observation), ""]
    if step.error:
        out += [f"**Error:** {step.error}", ""]
    if step.kind == "format_error" and step.raw:
        out += ["**Raw reply:**", "", _fence(step.raw), ""]
    if step.sources:
        out += ["**Sources:** " + ", ".join(step.sources), ""]
    if step.attachments:
        out += ["**Attachments:** " + "; ".join(a.describe() for a in step.attachments), ""]
    return out


def source_domain(url: str) -> str:
    """``https://www.fifa.com/final`` -> ``fifa.com``: how a source is named to people.

    The host alone (no user info, port, path or query, so ``https://bank.com@evil.example``
    is named ``evil.example``), lower case, an internationalised name in its ASCII form (a
    look-alike cannot pass for another site); "" when the URL has no usable host.
    """
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:  # e.g. an unbalanced [ in the host part
        return ""
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return ""
    host = host.removeprefix("www.")
    return host if _HOST.fullmatch(host) else ""


def one_line(text: str, width: int) -> str:
    """``text`` on one line (runs of white space as one space), at most ``width`` characters,
    an ellipsis marking a cut."""
    flat = " ".join(text.split())
    width = max(1, width)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summary_line(trace: Trace) -> str:
    made = steps_made(trace)
    if made:
        counted = f"{made} step{'s' if made != 1 else ''}"
    elif trace.status == "unformatted":
        counted = "unformatted reply"
    else:
        counted = "no step completed"
    parts = [counted, f"{trace.seconds:.1f} s"]
    if trace.status == "refused":
        parts.insert(0, "refused by the model")
    if trace.total_tokens:
        parts.append(f"{trace.total_tokens:,} tokens")
    cost = trace.cost_usd
    if cost is not None:
        parts.append(format_usd(cost))
    if trace.models:
        parts.append(", ".join(dict.fromkeys(trace.models)))
    parts.append(f"{trace.mode} mode")
    if trace.persona:
        parts.append("channel persona")
    return " · ".join(parts)


def steps_made(trace: Trace) -> int:
    """Steps that produced something (a thought, an action, an answer or an observation):
    a model call that failed, or was stopped, before writing anything is not a step anyone
    saw. Every count of steps people read (footers, "Stopped after step N", trace headers)
    is this one; ``Trace.step_count`` counts model calls (``max_steps``, metrics)."""
    return sum(
        1
        for s in trace.steps
        if s.kind != "format_error"
        and not s.call
        and (
            s.thought or s.raw or s.action or s.observation is not None or s.reasoning or s.refusal
        )
    )


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def utc_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
