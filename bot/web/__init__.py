"""A page per trace: ``GET /t/{trace_id}``, ``GET /t/{a}/vs/{b}`` and the JSON and Markdown
downloads, on any ``aiohttp.web.Application`` (the ops endpoint's server mounts them).

Every URL carries ``exp`` (a Unix time) and ``sig``, an HMAC-SHA256 over the id(s) and that
expiry keyed with ``REACTBOT_LINK_SECRET``. A missing, wrong or expired signature gets the same
403 page whether the trace exists or not: the check comes before the store is asked.

Pages are rendered on the server with Jinja2 (autoescape on): everything in a trace is hostile
text, escaped in element text and attributes alike, and only ``http``/``https`` sources become
links. One stylesheet is inlined and allowed by its hash in a strict Content-Security-Policy;
there is no script and nothing is loaded from anywhere, this server included.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
import markupsafe
from aiohttp import web

from adapters.web.guard import guarded
from adapters.web.hosts import HostRule
from core.pricing import format_usd
from core.replay import diff_traces
from core.stores import TraceStore
from core.text import http_url, neutral_bidi
from core.trace import Trace, TraceStep, one_line, source_domain, summary_line, utc_iso

if TYPE_CHECKING:
    from bot.config import Config

__all__ = [
    "LinkSigner",
    "add_trace_pages",
    "parting",
    "render_compare",
    "render_trace",
]

log = logging.getLogger(__name__)

PREVIEW_CHARS = 600
PREVIEW_LINES = 8
"""An observation (or reasoning, raw reply) longer than this shows a preview and the whole
text behind "show all"."""
FIELD_CHARS = 200_000
"""At most this much of one field goes into the page; the downloads hold all of it."""
HREF_CHARS = 4000
"""A longer source URL is shown but not linked."""
SOURCE_CHARS = 300
"""A source URL longer than this is shown shortened (the link still goes to all of it)."""
INPUT_SHOWN = 120
"""Characters of an action's input shown on its step's row (all of it is below the row)."""
PAGE_CHARS = 1_500_000
"""Whole text of long fields one page shows, all fields together (see ``Room``)."""
BAR_STEPS = 20
"""Duration bars are drawn in 5 % steps: CSS classes, since the policy allows no inline
style attribute."""

FORBIDDEN_BODY = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>reactbot</title></head>"
    "<body><p>This link is not valid or has expired. Ask the bot for a new one "
    "(<code>reactbot trace show</code>, or the trace thread).</p></body></html>"
)
"""The one answer to any link that does not check out: it says nothing about the trace."""

_SIGNED_TAG = "reactbot trace page link v1"
_EXP = re.compile(r"[0-9]{1,12}")
_SIG = re.compile(r"[0-9a-f]{64}")
_FILE_SAFE = re.compile(r"[^A-Za-z0-9_-]")


# ---- links --------------------------------------------------------------------------------


class LinkSigner:
    """Makes and checks the signed links of trace pages.

    ``link`` gives None (no link is shown anywhere) without a secret or a ``public_url``;
    ``check`` refuses everything without a secret.
    """

    def __init__(
        self,
        secret: str | None,
        *,
        public_url: str | None,
        ttl: float = 7 * 86400,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = secret.encode() if secret else None
        self.public_url = public_url.rstrip("/") if public_url else None
        self.ttl = ttl
        self._clock = clock

    @classmethod
    def from_config(cls, config: Config) -> LinkSigner:
        """Off (no links, no pages) unless ``web.enabled``, ``REACTBOT_LINK_SECRET`` and the
        ops server that serves the pages (``ops.enabled``)."""
        secret = config.secrets.link_secret
        if not config.web.enabled or not config.ops.enabled or secret is None:
            return cls(None, public_url=None, ttl=config.web.link_ttl)
        return cls(
            secret.get_secret_value(), public_url=config.web.public_url, ttl=config.web.link_ttl
        )

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def __repr__(self) -> str:  # never the key
        return f"LinkSigner(public_url={self.public_url!r}, ttl={self.ttl}, key={'set' if self._key else 'unset'})"

    def sign(self, *ids: str, exp: int) -> str:
        if self._key is None:
            raise RuntimeError("no REACTBOT_LINK_SECRET: nothing can be signed")
        # Lengths first, so no two different id lists can give the same message; the tag
        # keeps these signatures apart from anything else the key might ever sign.
        parts = [_SIGNED_TAG, str(len(ids)), *(f"{len(i)}:{i}" for i in ids), str(exp)]
        message = "\n".join(parts).encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def query(self, *ids: str, exp: int | None = None) -> str:
        """``exp=…&sig=…`` for ``ids`` (one trace, or the two of a comparison)."""
        expires = exp if exp is not None else int(self._clock() + self.ttl)
        return f"exp={expires}&sig={self.sign(*ids, exp=expires)}"

    def link(self, trace_id: str) -> str | None:
        """The page of one trace, or None when links are off."""
        if self._key is None or self.public_url is None:
            return None
        return f"{self.public_url}/t/{_segment(trace_id)}?{self.query(trace_id)}"

    def compare_link(self, a: str, b: str) -> str | None:
        """Two runs side by side (a replay and its original), or None when links are off."""
        if self._key is None or self.public_url is None:
            return None
        return f"{self.public_url}/t/{_segment(a)}/vs/{_segment(b)}?{self.query(a, b)}"

    def check(self, *ids: str, exp: str | None, sig: str | None) -> bool:
        """True when ``sig`` signs ``ids`` until ``exp`` and ``exp`` is still ahead."""
        if self._key is None or exp is None or sig is None:
            return False
        if not _EXP.fullmatch(exp) or not _SIG.fullmatch(sig):
            return False
        expires = int(exp)
        if expires <= self._clock():
            return False
        return hmac.compare_digest(self.sign(*ids, exp=expires), sig)


def _segment(trace_id: str) -> str:
    return quote(trace_id.encode("utf-8", "surrogatepass"), safe="")


# ---- comparing two runs -------------------------------------------------------------------


def parting(a: Trace, b: Trace) -> tuple[int | None, int | None, str]:
    """Where two runs part, in the words ``reactbot trace diff`` uses (both read
    ``core.replay.diff_traces``): the position, in each run's steps, of the first step where
    they differ (None when only the answer differs, or nothing), and the sentence."""
    diff = diff_traces(a, b)
    if diff.first is None or diff.rows[diff.first].label == "answer":
        return None, None, diff.summary()
    before = diff.rows[: diff.first]
    left = sum(1 for row in before if row.left is not None)
    right = sum(1 for row in before if row.right is not None)
    return left, right, diff.summary()


# ---- rendering ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    """A field as the page shows it: ``preview`` (the whole text when short), and ``full``
    behind "show all" when longer, or None when the page has no room left for it."""

    preview: str
    full: str | None
    chars: int
    cut: int
    """Characters of ``full`` left out (all of them are in the downloads)."""

    @property
    def folded(self) -> bool:
        return self.preview != self.full


class Room:
    """Characters of whole field text one page may still show: past ``PAGE_CHARS`` the
    long fields show only their preview (a 50-step run of 100 KB observations is a download,
    not a page for a phone)."""

    def __init__(self, chars: int = PAGE_CHARS) -> None:
        self.left = chars

    def take(self, wanted: int) -> int:
        given = max(0, min(wanted, self.left))
        self.left -= given
        return given


def fold(text: str, room: Room | None = None) -> Text:
    head = "\n".join(text[: PREVIEW_CHARS + 1].split("\n", PREVIEW_LINES)[:PREVIEW_LINES])
    head = head[:PREVIEW_CHARS]
    if head == text:
        return Text(preview=text, full=text, chars=len(text), cut=0)
    wanted = min(len(text), FIELD_CHARS)
    kept = room.take(wanted) if room is not None else wanted
    full = text[:kept] if kept > len(head) else None
    cut = len(text) - kept if full is not None else len(text)
    return Text(preview=head.rstrip() + " …", full=full, chars=len(text), cut=cut)


@dataclass(frozen=True, slots=True)
class Source:
    href: str | None
    """None when the text is not an http(s) URL: it is shown, never linked."""
    text: str
    domain: str


def source(url: str) -> Source:
    shown = url if len(url) <= SOURCE_CHARS else url[: SOURCE_CHARS - 1] + "…"
    return Source(_safe_href(url), shown, source_domain(url))


def _safe_href(url: str) -> str | None:
    """``url`` when the page may link it (``core.text.http_url``); None: shown as text."""
    return http_url(url, limit=HREF_CHARS)


def _bar(seconds: float, longest: float) -> int:
    if longest <= 0 or seconds <= 0:
        return 0
    return max(1, min(BAR_STEPS, round(seconds / longest * BAR_STEPS)))


def _step_view(step: TraceStep, longest: float, *, models: int, room: Room) -> dict[str, Any]:
    short = one_line(step.action_input, INPUT_SHOWN) if step.action_input else ""
    return {
        "step": step,
        "input_short": short,
        "input_whole": short == step.action_input,
        "model": step.model if models > 1 else "",
        "label": f"{step.index}" + (f".{step.call + 1}" if step.call else ""),
        "bar": _bar(step.seconds, longest),
        "thought": fold(step.thought, room) if step.thought else None,
        "reasoning": fold(step.reasoning, room) if step.reasoning else None,
        "action_input": fold(step.action_input, room) if step.action_input is not None else None,
        "observation": fold(step.observation, room) if step.observation is not None else None,
        "error": fold(step.error, room) if step.error and step.error != step.observation else None,
        "raw": fold(step.raw, room) if step.kind == "format_error" and step.raw else None,
        "approval": step.approval.describe() if step.approval is not None else None,
        "sources": [source(u) for u in step.sources],
        "attachments": [a.describe() for a in step.attachments],
    }


def _trace_view(trace: Trace, *, query: str, parts_at: int | None = None) -> dict[str, Any]:
    longest = max((s.seconds for s in trace.steps), default=0.0)
    models = len({s.model for s in trace.steps if s.model} | set(trace.models))
    room = Room()  # the question, answer and reason first: they matter most
    question = fold(trace.question, room)
    answer = fold(trace.answer, room) if trace.answer else None
    reason = fold(trace.reason, room) if trace.reason else None
    steps = [_step_view(s, longest, models=models, room=room) for s in trace.steps]
    return {
        "trace": trace,
        "segment": _segment(trace.id),
        "file": _FILE_SAFE.sub("_", trace.id)[:64] or "trace",
        "query": query,
        "status": trace.status.replace("_", " "),
        "mark": _STATUS_MARKS.get(trace.status, "⚠️"),
        "status_class": trace.status if trace.status in _STATUSES else "other",
        "summary": summary_line(trace),
        "started": utc_iso(trace.started_at) if trace.started_at else None,
        "models": ", ".join(dict.fromkeys(m for m in trace.models if m)),
        "steps": steps,
        "parts_at": parts_at,
        "question": question,
        "answer": answer,
        "reason": reason,
        "sources": [source(u) for u in (trace.cited or trace.sources)],
    }


_STATUSES = frozenset({"running", "answered", "unformatted", "best_effort", "failed", "cancelled"})
_STATUS_MARKS = {"answered": "✅", "cancelled": "⏹️", "failed": "❌", "running": "⏳"}


def _environment(css: str | None = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bot.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Every value a page shows, bidirectional controls made visible (core.text).
        finalize=_shown,
    )
    # Our own file, checked to hold no "</": trusted, so it is not escaped (its hash in the
    # policy is of exactly these characters).
    env.globals["stylesheet"] = markupsafe.Markup(css if css is not None else stylesheet())
    env.globals["usd"] = format_usd
    return env


def _shown(value: object) -> object:
    """A value as a page shows it: outside text with its bidirectional controls made
    visible; our own markup (``Markup``: the stylesheet) as it is."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return neutral_bidi(value)
    return value


def stylesheet() -> str:
    css = resources.files("bot.web").joinpath("page.css").read_text(encoding="utf-8")
    bars = "".join(f".w{i}{{width:{i * 100 // BAR_STEPS}%}}" for i in range(BAR_STEPS + 1))
    return css + bars + "\n"


def content_security_policy(css: str) -> str:
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    return (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def render_trace(env: jinja2.Environment, trace: Trace, *, query: str) -> str:
    """The page of one trace; ``query`` is the signed ``exp=…&sig=…`` its downloads carry."""
    return env.get_template("trace.html").render(t=_trace_view(trace, query=query))


def render_compare(
    env: jinja2.Environment, a: Trace, b: Trace, *, query_a: str, query_b: str
) -> str:
    left, right, verdict = parting(a, b)
    return env.get_template("compare.html").render(
        a=_trace_view(a, query=query_a, parts_at=left),
        b=_trace_view(b, query=query_b, parts_at=right),
        parts_at=left if left is not None else right,
        verdict=verdict,
    )


# ---- the routes ---------------------------------------------------------------------------


def add_trace_pages(
    web_app: web.Application,
    *,
    traces: TraceStore,
    signer: LinkSigner,
    hosts: HostRule | None = None,
) -> None:
    """Add the trace pages and downloads to ``web_app`` (nothing is added without a secret:
    the pages are off). ``hosts``: the names they answer (``adapters.web.hosts``), on a
    server whose other routes do not check them (the ops server's probes and metrics); None
    where the whole application checks them already (the web chat's)."""
    if not signer.enabled:
        log.info("trace pages are off: REACTBOT_LINK_SECRET is not set")
        return
    css = stylesheet()
    pages = _Pages(traces, signer, _environment(css), policy=content_security_policy(css))
    routes = {
        "/t/{trace_id}": pages.trace,
        "/t/{trace_id}/trace.json": pages.download_json,
        "/t/{trace_id}/trace.md": pages.download_markdown,
        "/t/{a}/vs/{b}": pages.compare,
    }
    for path, handler in routes.items():
        web_app.router.add_get(path, handler if hosts is None else guarded(hosts, handler))


class _Pages:
    def __init__(
        self, traces: TraceStore, signer: LinkSigner, env: jinja2.Environment, *, policy: str
    ) -> None:
        self.traces = traces
        self.signer = signer
        self.env = env
        self.headers = {
            "Content-Security-Policy": policy,
            # The URL is the credential: it must not travel on to a source that is clicked.
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Cache-Control": "private, no-store",
            "X-Robots-Tag": "noindex, nofollow",
        }

    async def trace(self, request: web.Request) -> web.Response:
        trace = await self._signed_trace(request)
        if isinstance(trace, web.Response):
            return trace
        query = f"exp={request.query['exp']}&sig={request.query['sig']}"
        return self._html(render_trace(self.env, trace, query=query))

    async def compare(self, request: web.Request) -> web.Response:
        a_id, b_id = request.match_info["a"], request.match_info["b"]
        exp = request.query.get("exp")
        if not self.signer.check(a_id, b_id, exp=exp, sig=request.query.get("sig")):
            return self._forbidden()
        assert exp is not None
        found = [await self._get(a_id), await self._get(b_id)]
        for item in found:
            if isinstance(item, web.Response):
                return item
        a, b = found
        assert isinstance(a, Trace) and isinstance(b, Trace)
        expires = int(exp)  # each column's own downloads, valid as long as this page
        page = render_compare(
            self.env,
            a,
            b,
            query_a=self.signer.query(a_id, exp=expires),
            query_b=self.signer.query(b_id, exp=expires),
        )
        return self._html(page)

    async def download_json(self, request: web.Request) -> web.Response:
        trace = await self._signed_trace(request)
        if isinstance(trace, web.Response):
            return trace
        return self._download(trace, trace.to_json(indent=2) + "\n", "json", "application/json")

    async def download_markdown(self, request: web.Request) -> web.Response:
        trace = await self._signed_trace(request)
        if isinstance(trace, web.Response):
            return trace
        return self._download(trace, trace.to_markdown(), "md", "text/markdown")

    # ---- parts ----------------------------------------------------------------------------
    async def _signed_trace(self, request: web.Request) -> Trace | web.Response:
        trace_id = request.match_info["trace_id"]
        query = request.query
        if not self.signer.check(trace_id, exp=query.get("exp"), sig=query.get("sig")):
            return self._forbidden()
        return await self._get(trace_id)

    async def _get(self, trace_id: str) -> Trace | web.Response:
        try:
            trace = await self.traces.get(trace_id)
        except Exception:
            log.exception("the trace store failed to read a trace for its page")
            return self._message(
                503, "The trace store is not answering right now. Try the link again shortly."
            )
        if trace is None:  # only a valid link gets this far: its trace has expired since
            return self._message(404, "This trace is no longer stored (traces expire).")
        return trace

    def _html(self, body: str, status: int = 200) -> web.Response:
        return web.Response(
            text=body, status=status, content_type="text/html", headers=self.headers
        )

    def _forbidden(self) -> web.Response:
        return self._html(FORBIDDEN_BODY, 403)

    def _message(self, status: int, text: str) -> web.Response:
        return self._html(self.env.get_template("message.html").render(text=text), status)

    def _download(self, trace: Trace, text: str, ext: str, kind: str) -> web.Response:
        name = f"trace-{_FILE_SAFE.sub('_', trace.id)[:64] or 'trace'}.{ext}"
        headers = {**self.headers, "Content-Disposition": f'attachment; filename="{name}"'}
        return web.Response(text=text, content_type=kind, charset="utf-8", headers=headers)
