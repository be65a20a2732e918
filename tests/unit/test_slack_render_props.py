"""Property tests: whatever a model, a tool, a web page or a person deciding on an action
writes, every Slack payload the renderer makes is one Slack accepts (the fake's own
validator), pings nobody, links only to our sources under their host's name, keeps code
fences closed and never cuts an escaped entity in half; and rendering stays fast and small
for huge inputs (an action waiting for approval and decided ones included)."""

from __future__ import annotations

import re
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.live import VERBOSITIES, RunView, Verbosity
from adapters.policy import Approvers
from adapters.slack.approval import EDIT_LIMIT, parse_button_value
from adapters.slack.blocks import (
    ANSWER_PARTS,
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    SlackMessage,
    answer_is_cut,
)
from adapters.slack.markdown import escape, to_mrkdwn
from adapters.slack.render import SlackRenderer
from adapters.slack.trace_thread import shorten
from adapters.words import SHUTDOWN
from core.events import (
    ActionDecided,
    AnswerDelta,
    ApprovalDecided,
    ApprovalOutcome,
    ApprovalRequested,
    Cancelled,
    Event,
    Failed,
    Finished,
    FormatRetry,
    Notice,
    ObservationReady,
    ReasoningDelta,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from core.trace import ApprovalRecord, Trace, TraceStep, source_domain
from tests.fakes.slack_server import TEXT_LIMIT, validate_message
from tests.properties import property_settings

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

CLOCK = lambda: 1000.0  # noqa: E731 - a fixed clock keeps elapsed seconds stable
PROPERTY = property_settings(500)

# ---- strategies -----------------------------------------------------------------------------

HOSTILE = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U123ABC>",
    "<#C123ABC>",
    "<!subteam^S123|@team>",
    "[Verify your account](https://evil.example)",
    "<https://evil.example|Verify>",
    "&lt;!here&gt;",
    "&amp;",
    "&",
    "<",
    ">",
    "|",
    "```",
    "````",
    "`",
    "```python\nprint(1)",
    "~~~",
    "*bold* _it_ ~s~",
    "\u202e",  # right-to-left override
    "\u200b",
    "\n",
    "\t",
    " ",
]
SCRIPTS = [
    "שלום עולם",  # Hebrew
    "مرحبا بالعالم",  # Arabic
    "e\u0301\u0301\u0301",  # combining accents
    "Z\u0336a\u0336l\u0336g\u0336o\u0336",
    "👩‍👩‍👧‍👦🏳️‍🌈👍🏽",
    "東京都の人口は約1400万人です。",
    "한국어 텍스트",
    "\U0001f600" * 3,
]
URL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"

short = st.text(max_size=40)
pieces = st.one_of(short, st.sampled_from(HOSTILE), st.sampled_from(SCRIPTS))
hosts = st.sampled_from(["evil.example", "www.example.org", "a.b.c.test", "xn--bcher-kva.example"])
urls = st.builds(
    lambda scheme, host, path, n: f"{scheme}://{host}/{path * n}",
    st.sampled_from(["https", "http"]),
    hosts,
    st.text(alphabet=URL_CHARS, min_size=1, max_size=20),
    st.integers(1, 100),  # up to ~2,000 characters
)
odd_urls = st.one_of(
    urls,
    st.sampled_from(
        [
            "https://evil.example|Verify",
            "https://evil.example/<!channel>",
            "javascript:alert(1)",
            "https://paypal.com@evil.example/login",
            "https://evil.example/a>b",
            "",
            "not a url",
        ]
    ),
)
long_word = st.builds(
    lambda c, n: c * n, st.sampled_from(["a", "&", "<", "`", "東", "👍"]), st.integers(1, 3000)
)
fences = st.builds(
    lambda parts: "".join(parts),
    st.lists(st.sampled_from(["```", "`", "``", "\n", "code", "````", "~~~"]), max_size=20),
)


def texts(max_pieces: int = 12) -> st.SearchStrategy[str]:
    """Mixed text: ordinary, hostile, other scripts, URLs, long unbroken words, fences."""
    piece = st.one_of(pieces, urls, long_word, fences)
    return st.lists(piece, max_size=max_pieces).map("".join)


users = st.sampled_from(["U1ADA", "W2BOB", "U999", "<!channel>", "", "UABC|x", "u1ada", "@here"])


@dataclass
class DecisionSpec:
    """How a person decided on a step's action (the reason and an edit are theirs, or the
    model's: outside text either way)."""

    outcome: ApprovalOutcome
    by: str | None
    reason: str
    edited: str
    remembered: bool


@dataclass
class StepSpec:
    thought: str
    reasoning: str
    action: str | None
    action_input: str
    observation: str | None
    error: bool
    sources: tuple[str, ...]
    decision: DecisionSpec | None = None


OUTCOMES: list[ApprovalOutcome] = ["approved", "edited", "denied", "timeout", "allowed"]


def decisions(text: st.SearchStrategy[str]) -> st.SearchStrategy[DecisionSpec | None]:
    return st.one_of(
        st.none(),
        st.builds(
            DecisionSpec,
            outcome=st.sampled_from(OUTCOMES),
            by=st.one_of(st.none(), users),
            reason=st.one_of(st.just(""), text),
            edited=text,
            remembered=st.booleans(),
        ),
    )


def steps(max_steps: int, text: st.SearchStrategy[str]) -> st.SearchStrategy[list[StepSpec]]:
    step = st.builds(
        StepSpec,
        thought=text,
        reasoning=st.one_of(st.just(""), text),
        action=st.one_of(st.none(), st.sampled_from(["search", "calculate", "lookup"]), short),
        action_input=text,
        observation=st.one_of(st.none(), text),
        error=st.booleans(),
        sources=st.lists(odd_urls, max_size=4).map(tuple),
        decision=decisions(text),
    )
    return st.lists(step, max_size=max_steps)


@dataclass
class PendingSpec:
    """An action waiting for a person when the run is looked at."""

    name: str
    input: str
    thought: str
    call: int
    timeout: float
    json_input: bool
    remember: bool


def pendings(text: st.SearchStrategy[str]) -> st.SearchStrategy[PendingSpec | None]:
    return st.one_of(
        st.none(),
        st.builds(
            PendingSpec,
            name=st.one_of(st.sampled_from(["files_delete", "send_mail"]), short),
            input=st.one_of(text, long_word),
            thought=text,
            call=st.integers(0, 3),
            timeout=st.floats(0.01, 86_400),
            json_input=st.booleans(),
            remember=st.booleans(),
        ),
    )


@dataclass
class Run:
    question: str
    asker: str
    specs: list[StepSpec]
    answer: str
    ending: str
    reason: str
    stopper: str | None
    status_text: str
    cited: list[str] = field(default_factory=list)
    pending: PendingSpec | None = None
    approvers: Approvers = "asker"

    def events(self) -> list[Event]:
        out: list[Event] = [RunStarted("run1", self.question, "model-x", max(1, len(self.specs)))]
        for n, spec in enumerate(self.specs, 1):
            out.append(StepStarted(n, len(self.specs)))
            if spec.reasoning:
                out.append(ReasoningDelta(n, spec.reasoning))
            out.append(ThoughtDelta(n, spec.thought))
            if spec.error and spec.action is None:  # the reply did not follow the format
                out.append(FormatRetry(n, 1, spec.action_input))
            if spec.action is not None:
                out.append(ActionDecided(n, spec.action, spec.action_input))
                if spec.decision is not None:
                    out += self._decided(n, spec, spec.decision)
            if spec.observation is not None:
                out.append(
                    ObservationReady(
                        n, spec.action or "?", spec.observation, spec.error, 0.1, spec.sources
                    )
                )
        if self.status_text:
            out.append(Notice("info", self.status_text))
        if self.answer:
            out.append(AnswerDelta(len(self.specs) or 1, self.answer))
        if self.pending is not None:
            p, n = self.pending, len(self.specs) or 1
            out.append(ActionDecided(n, p.name, p.input, p.call))
            out.append(
                ApprovalRequested(
                    n, p.call, p.name, p.input, p.thought, p.timeout, p.json_input, p.remember
                )
            )
        return out

    @staticmethod
    def _decided(n: int, spec: StepSpec, d: DecisionSpec) -> list[Event]:
        runs = d.edited if d.outcome == "edited" else spec.action_input
        asked = ApprovalRequested(n, 0, spec.action or "?", spec.action_input, spec.thought, 300.0)
        decided = ApprovalDecided(n, 0, d.outcome, d.by, runs, d.reason, d.remembered)
        if d.outcome == "edited":
            return [asked, decided, ActionDecided(n, spec.action or "?", runs)]
        return [asked, decided]

    def trace(self) -> Trace:
        trace = Trace(
            question=self.question,
            user=self.asker,
            models=["model-x", self.status_text[:50]],
            started_at=10.0,
            ended_at=12.5,
        )
        for n, spec in enumerate(self.specs, 1):
            trace.steps.append(
                TraceStep(
                    n,
                    kind="format_error" if spec.error and spec.action is None else "step",
                    thought=spec.thought,
                    reasoning=spec.reasoning,
                    action=spec.action,
                    action_input=spec.action_input,
                    observation=spec.observation,
                    error=spec.observation if spec.error else None,
                    raw=spec.thought + spec.action_input,
                    sources=list(spec.sources),
                    model=self.status_text[:80],
                    prompt_tokens=10,
                    completion_tokens=n,
                    approval=self._record(spec.decision),
                )
            )
        trace.answer = self.answer or None
        trace.status = self.ending if self.ending in _STATUSES else "answered"  # type: ignore[assignment]
        trace.reason = self.reason or None
        trace.stopped_by = self.stopper
        trace.cited = self.cited
        return trace

    @staticmethod
    def _record(d: DecisionSpec | None) -> ApprovalRecord | None:
        if d is None:
            return None
        edited = d.edited if d.outcome == "edited" else None
        return ApprovalRecord(d.outcome, d.by, 12.0, edited, d.reason, d.remembered)

    def final_event(self) -> Event:
        trace = self.trace()
        if self.ending == "failed":
            return Failed(trace, self.reason, "model")
        if self.ending == "cancelled":
            return Cancelled(trace, by=self.stopper)
        return Finished(trace, self.answer, self.ending)  # type: ignore[arg-type]

    def view(self, *, final: bool) -> RunView:
        view = RunView(
            question=self.question, asker=self.asker, started_at=990.0, approvers=self.approvers
        )
        for event in self.events():
            view.apply(event)
        if final:
            view.apply(self.final_event())
        return view

    @property
    def mentions(self) -> set[str]:
        people = {self.asker, self.stopper} | {s.decision.by for s in self.specs if s.decision}
        return {u for u in people if u and re.fullmatch(r"[UW][A-Z0-9]{2,}", u)}

    @property
    def sources(self) -> set[str]:
        return {u for s in self.specs for u in s.sources} | set(self.cited)


_STATUSES = ("answered", "unformatted", "best_effort", "failed", "cancelled")


def runs(max_steps: int = 6, text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Run]:
    text = text if text is not None else texts()
    return st.builds(
        Run,
        question=text,
        asker=users,
        specs=steps(max_steps, text),
        answer=text,
        ending=st.sampled_from(_STATUSES),
        reason=text,
        stopper=st.one_of(st.none(), users, st.just(SHUTDOWN)),
        status_text=st.one_of(st.just(""), text),
        cited=st.lists(odd_urls, max_size=12),
        pending=pendings(text),
        approvers=st.sampled_from(["asker", "admins", "anyone"]),
    )


# ---- what every payload must satisfy --------------------------------------------------------

_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")
_ANGLED = re.compile(r"<([^<>]*)>")


def mrkdwn_texts(message: SlackMessage) -> Iterable[str]:
    def walk(node: Any) -> Iterable[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    yield message.text
    yield from walk(list(message.blocks))


_BARE_LINK = re.compile(r"https?://[^\s<>|\[\]()`]{1,500}", re.IGNORECASE)


def check(message: SlackMessage, run: Run) -> None:
    refusal = validate_message(message.kwargs())
    assert refusal is None, refusal
    assert message.text.strip(), "the notification text is never blank"
    assert len(message.text) <= TEXT_LIMIT
    assert len(message.blocks) <= MAX_BLOCKS
    for text in mrkdwn_texts(message):
        assert text.strip(), "no blank text in a block"
        assert text.count("```") % 2 == 0, f"unclosed code block: {text[-200:]!r}"
        assert _ENTITY.search(text) is None, f"a bare or cut entity: {text!r}"
        inside = 0
        for match in _ANGLED.finditer(text):
            inside += 1
            token = match.group(1)
            if token.startswith("@"):
                assert token[1:] in run.mentions, f"a mention nobody asked for: {token!r}"
                continue
            url, bar, label = token.partition("|")
            url = url.replace("&amp;", "&")  # Slack wants & escaped inside links too
            if not bar:  # an answer's own link, shown as its URL: nothing hidden behind it
                assert _BARE_LINK.fullmatch(url), f"a link that is not a plain URL: {token!r}"
                continue
            assert url in run.sources, f"a link we did not make: {token!r}"
            netloc = urllib.parse.urlsplit(url).netloc
            assert "@" not in netloc, f"a link whose host is not what it seems: {url!r}"
            assert label == escape(source_domain(url)), f"a link labelled {label!r} for {url!r}"
        assert text.count("<") == text.count(">") == inside, f"a stray angle bracket: {text!r}"


def check_all(messages: Iterable[SlackMessage], run: Run) -> int:
    count = 0
    for message in messages:
        check(message, run)
        check(shorten(message), run)
        count += 1
    return count


# ---- the properties -------------------------------------------------------------------------


def renderer(run: Run, *, run_id: str | None = "run1") -> SlackRenderer:
    return SlackRenderer(run_id=run_id, clock=CLOCK, approval_timeout=300.0)


@PROPERTY
@given(runs(), st.sampled_from(VERBOSITIES))
def test_live_messages_are_always_accepted(run: Run, verbosity: Verbosity) -> None:
    view = run.view(final=False)
    view.verbosity = verbosity  # a brief channel still sees a pending action and its buttons
    message = renderer(run).live(view)
    check_all([message], run)
    assert message.size <= MESSAGE_BUDGET
    check_approval_buttons(message, run)


def check_approval_buttons(message: SlackMessage, run: Run) -> None:
    """A pending action's buttons say which action they decide, whoever receives the click;
    Edit is offered when the input fits the modal's field."""
    actions = [b for b in message.blocks if b["type"] == "actions"]
    if run.pending is None:
        assert not actions
        return
    (block,) = actions
    ids = [e["action_id"] for e in block["elements"]]
    assert ids[0] == "reactbot_approve" and "reactbot_deny" in ids
    assert ("reactbot_always" in ids) == run.pending.remember
    step = len(run.specs) or 1
    for element in block["elements"]:
        ref = parse_button_value(element["value"])
        assert ref is not None and ref.key == ("run1", step, run.pending.call)
    assert ("reactbot_edit" in ids) == (len(run.pending.input) <= EDIT_LIMIT)


@PROPERTY
@given(runs(max_steps=3))
def test_a_pending_action_is_shown_whatever_its_text(run: Run) -> None:
    if run.pending is None:
        run.pending = PendingSpec("files_delete", "<!channel> ```x", "<@U999>", 0, 1.0, True, True)
    message = renderer(run).live(run.view(final=False))
    check_all([message], run)
    assert message.size <= MESSAGE_BUDGET
    check_approval_buttons(message, run)
    visible = str(message.blocks)
    assert "waiting for approval" in message.blocks[1]["text"]["text"]
    assert "denied automatically" in visible and "*Action:*" in visible
    without_buttons = SlackRenderer(run_id=None, clock=CLOCK).live(run.view(final=False))
    check_all([without_buttons], run)
    assert not [b for b in without_buttons.blocks if b["type"] == "actions"]


@PROPERTY
@given(runs(), st.sampled_from(VERBOSITIES))
def test_final_compact_and_plain_are_always_accepted(run: Run, verbosity: Verbosity) -> None:
    view = run.view(final=True)
    view.verbosity = verbosity
    render = renderer(run)
    final, compact = render.final(view), render.compact(view)
    check_all([final, compact, render.plain(run.answer), render.plain(run.reason)], run)
    assert final.size <= MESSAGE_BUDGET
    assert compact.size <= final.size or compact.size <= MESSAGE_BUDGET // 2
    buttons = [b for b in (*final.blocks, *compact.blocks) if "accessory" in b]
    assert not buttons and not any(b["type"] == "actions" for b in compact.blocks)


@PROPERTY
@given(runs(), st.booleans())
def test_trace_posts_are_always_accepted(run: Run, steps: bool) -> None:
    trace = run.trace()
    posts = renderer(run, run_id=None).trace_posts(trace, steps=steps)
    if not steps:  # "answer" verbosity: only the part of the answer the root could not show
        check_all(posts, run)
        assert bool(posts) == (bool(trace.answer) and answer_is_cut(trace.answer))
        return
    assert check_all(posts, run) >= 2  # at least the question and the totals
    decided = sum(1 for s in run.specs if s.decision is not None)
    assert sum(str(p.blocks).count("*Approval:*") for p in posts) == decided


@PROPERTY
@given(runs(max_steps=50, text=texts(max_pieces=3)))
def test_fifty_step_runs_stay_within_limits(run: Run) -> None:
    render = renderer(run)
    check_all([render.live(run.view(final=False))], run)
    view = run.view(final=True)
    check_all([render.final(view), render.compact(view)], run)
    check_all(render.trace_posts(run.trace()), run)


@PROPERTY
@given(run=runs(max_steps=2), answer=texts(max_pieces=40), size=st.integers(0, 40_000))
def test_long_answers_are_cut_in_the_root_and_complete_in_the_thread(
    run: Run, answer: str, size: int
) -> None:
    run.answer = (answer or "x") * max(1, size // max(1, len(answer)))
    run.ending = "answered"
    renderer = SlackRenderer(clock=CLOCK)
    view = run.view(final=True)
    final = renderer.final(view)
    check_all([final, renderer.compact(view)], run)
    posts = renderer.trace_posts(run.trace())
    check_all(posts, run)
    if "continued in the thread" in str(final.blocks):
        whole, (given, sections) = squeeze(to_mrkdwn(run.answer.strip())), thread_answer(posts)
        answer_posts = [p for p in posts if p.text == "Answer (continued)"]
        if any("more characters are in the stored trace" in str(p.blocks) for p in answer_posts):
            assert sections == ANSWER_PARTS and whole.startswith(given)
        else:
            assert given == whole


_ANSWER_LABEL = re.compile(r"^\*Answer\*(?: \(part \d+/\d+\))?:\n")


def squeeze(text: str) -> str:
    """``text`` without whitespace or backticks (which cuts may add: closing fences)."""
    return re.sub(r"[\s`]", "", text)


def thread_answer(posts: list[SlackMessage]) -> tuple[str, int]:
    """The answer as the thread's "*Answer*" sections give it, squeezed; and how many."""
    bodies = []
    for post in posts:
        for block in post.blocks:
            text = block.get("text", {}).get("text", "")
            label = _ANSWER_LABEL.match(text)
            if label:
                bodies.append(text[label.end() :])
    assert bodies, "a cut answer goes on in the thread"
    return squeeze("".join(bodies)), len(bodies)


# ---- bounded time and memory ----------------------------------------------------------------


def within(seconds: float, work: Callable[[], object]) -> object:
    """Runs ``work`` in a thread and fails if it has not returned after ``seconds``."""
    result: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"rendering took longer than {seconds} s"
    if errors:
        raise errors[0]
    return result[0]


def huge_run() -> Run:
    url = "https://evil.example/" + "a/" * 2_500  # 5,000 characters
    step = StepSpec(
        thought="<!channel> " * 10_000,  # 110 KB
        reasoning="`" * 100_000,
        action="search",
        action_input="&" * 100_000,
        observation="x" * 100_000,
        error=False,
        sources=(url,) * 4,
        decision=DecisionSpec("edited", "U2BOB", "<!here> " * 10_000, "&" * 100_000, True),
    )
    big = StepSpec("t", "", "fetch", "q", "y" * 1_000_000, False, (url,))  # a 1 MB page
    return Run(
        question="q" * 100_000,
        asker="U1ADA",
        specs=[big, *[step] * 49],
        answer="<@U999> " * 20_000,
        ending="answered",
        reason="",
        stopper=None,
        status_text="",
        cited=[url] * 50,
        pending=PendingSpec(
            "files_delete", "<@U999> " * 20_000, "<!channel> " * 10_000, 1, 300.0, True, True
        ),
    )


def test_huge_inputs_render_fast_and_small() -> None:
    run = huge_run()
    live_view, final_view, trace = run.view(final=False), run.view(final=True), run.trace()
    renderer = SlackRenderer(run_id="run1", clock=CLOCK, approval_timeout=300.0)

    def render_all() -> list[SlackMessage]:
        return [
            renderer.live(live_view),
            renderer.final(final_view),
            renderer.compact(final_view),
            renderer.plain(run.answer),
            *renderer.trace_posts(trace),
        ]

    tracemalloc.start()
    started = time.process_time()  # CPU time: the work is fixed, the machine's load is not
    try:
        messages = within(60.0, render_all)  # a hang guard; the CPU bound is below
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seconds = time.process_time() - started
    assert isinstance(messages, list)
    assert seconds < 5.0, seconds
    # The inputs hold ~17 MB (50 steps of ~330 KB, a 1 MB page); rendering them takes ~2 MB
    # (an input is cut before it is escaped, never copied per output piece).
    assert peak < 16 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"
    for message in messages:
        check(message, run)
    assert len(messages) < 400, "the thread stays readable: long texts are cut, not posted whole"
