"""The ``report.html`` of ``reactbot eval --out``: one self-contained page (no script, no
request anywhere) with the same escaping and Content-Security-Policy as the trace pages,
the policy carried in a ``<meta>`` element since a file has no response headers.

Every string in it (questions, answers, case ids, file names) is data: Jinja2 escapes it in
text and attributes alike, each answer is folded to a preview with the rest bounded by one
``Room`` for the page, and only signed ``http(s)`` trace links become links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.web import Room, _environment, _safe_href, content_security_policy, fold, stylesheet
from core.evals import Case, RunResult, Summary, seconds_text
from core.pricing import format_usd
from core.trace import one_line, utc_iso

LABEL_CHARS = 200
"""Model names, prompt file names and case ids are shown at most this long."""


def render_report(
    document: Mapping[str, Any],
    summaries: Sequence[Summary],
    results: Sequence[RunResult],
    cases: Mapping[str, Case],
    *,
    links: Mapping[str, str | None],
) -> str:
    css = stylesheet()
    env = _environment(css)
    room = Room()
    view = {
        "file": one_line(str(document.get("file", "")), LABEL_CHARS),
        "started": utc_iso(float(document.get("started_at", 0.0))),
        "accuracy": float(document.get("accuracy", 0.0)),
        "interrupted": bool(document.get("interrupted")),
        "planned": int(document.get("planned_runs", len(results))),
        "summaries": [_summary_row(s) for s in summaries],
        "regressions": [
            {"case": _label(g["case"]), "label": _label(_combination(g))}
            for g in document.get("regressions", ())
        ],
        "runs": [_run_row(r, cases.get(r.case), links.get(r.trace_id), room) for r in results],
    }
    return env.get_template("report.html").render(r=view, policy=content_security_policy(css))


def _summary_row(s: Summary) -> dict[str, str]:
    c = s.combination
    return {
        "model": _label(c.model),
        "mode": _label(c.mode),
        "prompt": _label(c.prompt or "built-in"),
        "accuracy": f"{s.accuracy:.1%}",
        "format_errors": f"{s.unformatted} / {s.reasked}",
        "steps": f"{s.mean_steps:.1f}",
        "tokens": f"{s.tokens_in:,}/{s.tokens_out:,}",
        "cost": format_usd(s.cost_usd) if s.cost_usd is not None else "—",
        "p50": seconds_text(s.p50),
        "p95": seconds_text(s.p95),
    }


def _run_row(r: RunResult, case: Case | None, link: str | None, room: Room) -> dict[str, Any]:
    return {
        "case": _label(r.case),
        "repeat": r.repeat,
        "label": _label(r.combination.label),
        "verdict": "pass" if r.passed else "fail",
        "answer": fold(r.answer or "—", room),
        "reason": one_line(r.reason, 500) if r.reason else None,
        "want": one_line(case.expect.describe(), 500) if case is not None else "",
        "steps": r.steps,
        "tokens": f"{r.tokens_in + r.tokens_out:,}",
        "cost": format_usd(r.cost_usd) if r.cost_usd is not None else "—",
        "seconds": f"{r.seconds:.2f}",
        "trace_id": _label(r.trace_id),
        "link": _safe_href(link) if link else None,
    }


def _combination(item: Mapping[str, Any]) -> str:
    return "/".join(str(item.get(k) or "") for k in ("model", "mode", "prompt") if item.get(k))


def _label(text: object) -> str:
    return one_line(str(text), LABEL_CHARS)
