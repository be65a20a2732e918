"""Eval cases and what their runs add up to: the pure half of ``reactbot eval``.

A case is a question and one expectation its answer must meet, or the source its lookup must
cite (``expect: {source: "notes.md"}``, with ``files`` to attach), or both. ``parse_case`` checks one
entry of a case file (already decoded from JSON or YAML by the caller: no I/O here) and says
what is wrong with it in one line naming the entry's line and the field. ``check`` gives a
verdict on an answer; ``summarise`` turns the runs of one combination (model, mode, prompt)
into the figures of its table row; ``regressions`` compares with an earlier results file.

Answers are model text: checks are bounded (a regex is at most ``PATTERN_CHARS`` long and is
matched against at most ``ANSWER_CHARS`` of the answer), and never raise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.errors import ReactbotError

ExpectKind = Literal["exact", "contains", "regex", "number", "any_of", "source"]
KINDS: tuple[ExpectKind, ...] = ("exact", "contains", "regex", "number", "any_of")
CASE_FIELDS = frozenset({"id", "question", "expect", "tags", "tools", "files", "before"})
RECALL_AT = 3
"""Recall@k of the source expectations: the source among the lookup's first k sources."""
QUESTION_CHARS = 20_000
"""A longer question is refused here (the agent would refuse it anyway, at a model call)."""
TEXT_CHARS = 2_000
"""An expected string (``exact``, ``contains``, each of ``any_of``) is at most this long."""
PATTERN_CHARS = 500
ANY_OF_ITEMS = 100
LIST_ITEMS = 100
BEFORE_ITEMS = 10
"""Tags and tools of one case."""
ID_CHARS = 100
ANSWER_CHARS = 20_000
"""Of an answer, only this much is checked (a runaway reply cannot stall a regex for long)."""
MAX_CASES = 10_000

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*")
# A number as people write it: 1,234.5 / -3 / 2.5e-3 / 1_000; thousands separators dropped.
_NUMBER = re.compile(r"(?<![\w.])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class CaseError(ReactbotError):
    """An eval case file is not usable; the message names the line and the field."""


@dataclass(frozen=True, slots=True)
class Expect:
    kind: ExpectKind
    value: str | float | tuple[str, ...]
    tolerance: float = 0.0
    source: str | None = None
    """What the run's first lookup must cite: a file (``notes.md``) or a section of one
    (``notes.md › Setup``); kind ``source`` when the answer is not checked."""

    def describe(self) -> str:
        """What is wanted, for the list of failures: ``42``, ``42 ± 0.5``, ``/^ok/``."""
        match self.kind:
            case "number":
                shown = f"{self.value:.12g}" if isinstance(self.value, float) else str(self.value)
                shown += f" ± {self.tolerance:g}" if self.tolerance else ""
            case "regex":
                shown = f"/{self.value}/"
            case "any_of":
                assert isinstance(self.value, tuple)
                shown = " or ".join(repr(v) for v in self.value)
            case "source":
                return f"a lookup citing {self.value!r}"
            case _:
                shown = repr(self.value)
        return shown + (f", citing {self.source!r}" if self.source else "")


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    question: str
    expect: Expect
    line: int
    tags: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    """The tools this case may use (None: every configured tool)."""
    files: tuple[str, ...] = ()
    """Files attached to the question, as the case file names them (relative to it)."""
    before: tuple[str, ...] = ()
    """Questions the same person asks first, each in a conversation of its own (what they
    told the bot there reaches the question only through its memories, ``memory.*``)."""


def parse_case(entry: object, *, line: int, number: int) -> Case:
    """One decoded entry of a case file (``line``: where it starts; ``number``: its place,
    from 1, which names a case that has no ``id``)."""
    where = f"line {line}"
    if not isinstance(entry, Mapping):
        raise CaseError(f"{where}: a case must be an object with question and expect")
    unknown = sorted(str(k) for k in entry if k not in CASE_FIELDS)
    if unknown:
        known = ", ".join(sorted(CASE_FIELDS))
        raise CaseError(f"{where}: unknown field {_shown(unknown[0])} (a case has {known})")
    case_id = _case_id(entry.get("id"), where, number)
    question = _text(entry.get("question"), f"{where}: question", QUESTION_CHARS)
    if not question.strip():
        raise CaseError(f"{where}: question: must not be empty")
    return Case(
        id=case_id,
        question=question,
        expect=parse_expect(entry.get("expect"), where=where),
        line=line,
        tags=_names(entry.get("tags", ()), f"{where}: tags"),
        tools=_names(entry["tools"], f"{where}: tools") if "tools" in entry else None,
        files=_files(entry.get("files", ()), f"{where}: files"),
        before=_before(entry.get("before", ()), f"{where}: before"),
    )


def parse_expect(raw: object, *, where: str) -> Expect:
    if raw is None:
        raise CaseError(f"{where}: expect: missing (one of {', '.join(KINDS)})")
    if not isinstance(raw, Mapping):
        raise CaseError(f'{where}: expect: must be an object such as {{"number": 42}}')
    source = None
    if "source" in raw:
        source = _text(raw["source"], f"{where}: expect.source", TEXT_CHARS).strip()
        if not source:
            raise CaseError(f"{where}: expect.source: must not be empty")
        if len(raw) == 1:
            return Expect("source", source, source=source)
    kinds = [k for k in raw if k in KINDS]
    others = sorted(str(k) for k in raw if k not in KINDS and k not in ("tolerance", "source"))
    if others:
        raise CaseError(f"{where}: expect.{_shown(others[0])}: unknown (use {', '.join(KINDS)})")
    if len(kinds) != 1:
        found = " and ".join(kinds) if kinds else "none"
        raise CaseError(f"{where}: expect: needs exactly one of {', '.join(KINDS)} ({found} given)")
    kind: ExpectKind = kinds[0]
    if "tolerance" in raw and kind != "number":
        raise CaseError(f"{where}: expect.tolerance: only goes with number")
    label = f"{where}: expect.{kind}"
    value = raw[kind]
    if kind == "number":
        tolerance = _number(raw.get("tolerance", 0), f"{where}: expect.tolerance")
        if tolerance < 0:
            raise CaseError(f"{where}: expect.tolerance: must not be negative")
        return Expect("number", _number(value, label), tolerance, source)
    if kind == "any_of":
        return Expect("any_of", _any_of(value, label), source=source)
    if kind == "regex":
        return Expect("regex", _pattern(value, label), source=source)
    text = _text(value, label, TEXT_CHARS)
    if not text.strip():
        raise CaseError(f"{label}: must not be empty")
    return Expect(kind, text, source=source)


def _files(raw: object, label: str) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or len(raw) > LIST_ITEMS:
        raise CaseError(f"{label}: must be a list of at most {LIST_ITEMS} paths")
    files = []
    for item in raw:
        if not isinstance(item, str) or not item.strip() or len(item) > ID_CHARS * 10:
            raise CaseError(f"{label}: each must be a path (text, at most {ID_CHARS * 10} chars)")
        files.append(item)
    return tuple(files)


def _before(raw: object, label: str) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or len(raw) > BEFORE_ITEMS:
        raise CaseError(f"{label}: must be a list of at most {BEFORE_ITEMS} questions")
    asked = tuple(_text(item, f"{label}[{i}]", QUESTION_CHARS) for i, item in enumerate(raw))
    if any(not question.strip() for question in asked):
        raise CaseError(f"{label}: a question must not be empty")
    return asked


def _case_id(raw: object, where: str, number: int) -> str:
    if raw is None:
        return f"case-{number}"
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise CaseError(f"{where}: id: must be a string")
    text = str(raw)
    if len(text) > ID_CHARS or not _ID.fullmatch(text):
        raise CaseError(
            f"{where}: id: {_shown(text)} is not a usable id (letters, digits and . _ : / -, "
            f"at most {ID_CHARS})"
        )
    return text


def _text(raw: object, label: str, limit: int) -> str:
    if not isinstance(raw, str):
        raise CaseError(f"{label}: must be a string{_not(raw)}")
    if len(raw) > limit:
        raise CaseError(f"{label}: {len(raw):,} characters long; the limit is {limit:,}")
    return raw


def _number(raw: object, label: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise CaseError(f"{label}: must be a number{_not(raw)}")
    value = float(raw)
    if not math.isfinite(value):
        raise CaseError(f"{label}: must be a finite number")
    return value


def _any_of(raw: object, label: str) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or not raw:
        raise CaseError(f"{label}: must be a non-empty list of strings")
    if len(raw) > ANY_OF_ITEMS:
        raise CaseError(f"{label}: {len(raw)} strings; the limit is {ANY_OF_ITEMS}")
    items = tuple(_text(item, f"{label}[{i}]", TEXT_CHARS) for i, item in enumerate(raw))
    for i, item in enumerate(items):
        if not item.strip():
            raise CaseError(f"{label}[{i}]: must not be empty")
    return items


def _pattern(raw: object, label: str) -> str:
    text = _text(raw, label, PATTERN_CHARS)
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise CaseError(f"{label}: not a valid regular expression ({exc})") from exc
    return text


def _names(raw: object, label: str) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple):
        raise CaseError(f"{label}: must be a list of names{_not(raw)}")
    if len(raw) > LIST_ITEMS:
        raise CaseError(f"{label}: {len(raw)} names; the limit is {LIST_ITEMS}")
    names = tuple(_text(item, f"{label}[{i}]", ID_CHARS) for i, item in enumerate(raw))
    for i, name in enumerate(names):
        if not name.strip():
            raise CaseError(f"{label}[{i}]: must not be empty")
    return names


def _not(raw: object) -> str:
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    shown = kind.get(type(raw), "a list" if isinstance(raw, list | tuple) else None)
    if raw is None:
        shown = "null"
    elif shown is None:
        shown = "an object" if isinstance(raw, Mapping) else type(raw).__name__
    return f", not {shown}"


def _shown(text: str, width: int = 40) -> str:
    """Quoted and cut: a field name from the file may be anything."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def check_unique(cases: Sequence[Case]) -> None:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            raise CaseError(
                f"line {case.line}: id: {_shown(case.id)} is used already (line {seen[case.id]})"
            )
        seen[case.id] = case.line


# ---- verdicts -----------------------------------------------------------------------------


def check(expect: Expect, answer: str | None) -> bool:
    """Whether ``answer`` meets ``expect``. Strings are compared case-insensitively with runs
    of white space as one space; ``exact`` wants the whole answer (less a final full stop),
    ``contains`` and ``any_of`` a part of it, ``regex`` a match anywhere (``re.search``),
    ``number`` the answer's last number within ``tolerance``."""
    if answer is None:
        return False
    text = answer[:ANSWER_CHARS]
    match expect.kind:
        case "exact":
            return _plain(text).removesuffix(".") == _plain(str(expect.value)).removesuffix(".")
        case "contains":
            return _plain(str(expect.value)) in _plain(text)
        case "any_of":
            assert isinstance(expect.value, tuple)
            flat = _plain(text)
            return any(_plain(v) in flat for v in expect.value)
        case "regex":
            return re.search(str(expect.value), text) is not None
        case "source":  # the citation decides (``source_rank``), not the answer
            return True
        case "number":
            found = last_number(text)
            assert isinstance(expect.value, float)
            return found is not None and abs(found - expect.value) <= expect.tolerance + 1e-9
    return False


def source_rank(expected: str, sources: Sequence[str]) -> int | None:
    """Where ``expected`` is among a lookup's ``sources`` (from 1), or None: a source is
    ``expected`` itself or a part of it (``notes.md`` matches ``notes.md › Setup`` and
    ``report.pdf`` matches ``report.pdf, page 3``)."""
    for rank, cited in enumerate(sources, start=1):
        if cited == expected or cited.startswith((f"{expected} ›", f"{expected},")):
            return rank
    return None


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


def last_number(text: str) -> float | None:
    """The last number written in ``text`` (``1,234.5`` is 1234.5), or None."""
    found = None
    for match in _NUMBER.finditer(text):
        found = match.group()
    if found is None:
        return None
    cleaned = found.replace(",", "").replace("_", "").replace("−", "-")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Combination:
    """One column of choices every case runs with."""

    model: str
    mode: str
    prompt: str = ""
    """The ``--prompt`` file as given; "" for the built-in prompt."""

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.model, self.mode, self.prompt) if p)

    def to_dict(self) -> dict[str, str]:
        return {"model": self.model, "mode": self.mode, "prompt": self.prompt}


@dataclass(frozen=True, slots=True)
class RunResult:
    case: str
    combination: Combination
    repeat: int
    answer: str | None
    status: str
    passed: bool
    steps: int
    format_errors: int
    """Replies re-asked because they did not follow the format."""
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    seconds: float
    trace_id: str
    reason: str | None = None
    """Why the run did not answer (failed, stopped), when it did not."""
    wants_source: bool = False
    source_rank: int | None = None
    """Where the expected source was among the first lookup's sources (from 1); None: not."""

    @property
    def unformatted(self) -> bool:
        return self.status == "unformatted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            **self.combination.to_dict(),
            "repeat": self.repeat,
            "answer": self.answer,
            "status": self.status,
            "verdict": "pass" if self.passed else "fail",
            "steps": self.steps,
            "format_errors": self.format_errors,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "seconds": round(self.seconds, 4),
            "trace_id": self.trace_id,
            "reason": self.reason,
            **({"source_rank": self.source_rank} if self.wants_source else {}),
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """A combination's table row."""

    combination: Combination
    runs: int
    passed: int
    unformatted: int
    reasked: int
    mean_steps: float
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    p50: float
    p95: float
    sourced: int = 0
    """Runs whose case expects a source; recall and MRR are over these."""
    recall: float = 0.0
    """Recall@``RECALL_AT``: the share of those runs whose source was in the first three."""
    mrr: float = 0.0
    """Mean reciprocal rank of the expected source (0 where it was not cited)."""

    @property
    def accuracy(self) -> float:
        return self.passed / self.runs if self.runs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.combination.to_dict(),
            "runs": self.runs,
            "passed": self.passed,
            "accuracy": round(self.accuracy, 6),
            "unformatted": self.unformatted,
            "reasked": self.reasked,
            "mean_steps": round(self.mean_steps, 4),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "latency_p50": round(self.p50, 4),
            "latency_p95": round(self.p95, 4),
            **(
                {f"recall_at_{RECALL_AT}": round(self.recall, 6), "mrr": round(self.mrr, 6)}
                if self.sourced
                else {}
            ),
        }


def summarise(combination: Combination, results: Sequence[RunResult]) -> Summary:
    mine = [r for r in results if r.combination == combination]
    costs = [r.cost_usd for r in mine if r.cost_usd is not None]
    seconds = sorted(r.seconds for r in mine)
    ranks = [r.source_rank for r in mine if r.wants_source]
    return Summary(
        combination=combination,
        runs=len(mine),
        passed=sum(r.passed for r in mine),
        unformatted=sum(r.unformatted for r in mine),
        reasked=sum(r.format_errors for r in mine),
        mean_steps=sum(r.steps for r in mine) / len(mine) if mine else 0.0,
        tokens_in=sum(r.tokens_in for r in mine),
        tokens_out=sum(r.tokens_out for r in mine),
        cost_usd=sum(costs) if costs else None,
        p50=percentile(seconds, 50),
        p95=percentile(seconds, 95),
        sourced=len(ranks),
        recall=sum(1 for r in ranks if r is not None and r <= RECALL_AT) / len(ranks)
        if ranks
        else 0.0,
        mrr=sum(1 / r for r in ranks if r is not None) / len(ranks) if ranks else 0.0,
    )


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of sorted values (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def seconds_text(seconds: float) -> str:
    """``0.42 s`` below ten seconds (a fast run is not ``0.0 s``), else ``12.3 s``."""
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def overall_accuracy(results: Sequence[RunResult]) -> float:
    return sum(r.passed for r in results) / len(results) if results else 0.0


# ---- a baseline ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BaselineRun:
    case: str
    combination: Combination
    passed: bool


@dataclass(frozen=True, slots=True)
class Regression:
    case: str
    combination: Combination
    trace_id: str


@dataclass(slots=True)
class Baseline:
    """The verdicts of an earlier run (its ``results.json``)."""

    runs: list[BaselineRun] = field(default_factory=list)

    def passed_before(self, case: str, combination: Combination) -> bool:
        """The case passed before in the same combination when the baseline has it (every
        repeat passed); else in every run of the case the baseline has (a new prompt or
        model is compared with what ran before)."""
        same = [r for r in self.runs if r.case == case and r.combination == combination]
        if not same:
            same = [r for r in self.runs if r.case == case]
        return bool(same) and all(r.passed for r in same)


def regressions(baseline: Baseline, results: Iterable[RunResult]) -> list[Regression]:
    """Each case and combination that passed before and has a failing run now (once)."""
    found: dict[tuple[str, Combination], Regression] = {}
    for result in results:
        key = (result.case, result.combination)
        if result.passed or key in found:
            continue
        if baseline.passed_before(result.case, result.combination):
            found[key] = Regression(result.case, result.combination, result.trace_id)
    return list(found.values())
