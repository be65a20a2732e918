"""``reactbot eval FILE``: every case of a case file, for each model, mode and prompt asked
for, through the Agent every surface uses; a table per combination, the failures, and with
``--out`` a ``results.json`` and a self-contained ``report.html``.

Exit codes: 0 all good; 1 a case that passed in ``--baseline`` fails now, or the accuracy is
below ``--min-accuracy``; 2 the eval cannot start (a bad case file, prompt, model, baseline or
option: one line says which); 130 stopped by Ctrl-C (what finished is still shown and written).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from adapters.terminal.render import printable
from core.agent import Agent
from core.approval import Decision
from core.errors import ReactbotError
from core.evals import (
    MAX_CASES,
    RECALL_AT,
    Baseline,
    BaselineRun,
    Case,
    CaseError,
    Combination,
    Regression,
    RunResult,
    Summary,
    check,
    check_unique,
    overall_accuracy,
    parse_case,
    regressions,
    seconds_text,
    source_rank,
    summarise,
)
from core.events import ApprovalRequested, FinalEvent, Mode
from core.files import FileRefused, extract, passages_of
from core.knowledge import registry_with_files
from core.llm import ChatModel
from core.memories import Asking, Holder, Where
from core.pricing import format_usd
from core.tools import ToolRegistry
from core.tools.lookup import Passage
from core.trace import Trace, one_line

if TYPE_CHECKING:
    from bot.app import App

FILE_BYTES = 20 * 1024 * 1024
"""A case file (or a baseline) larger than this is refused."""
FAILURES_SHOWN = 50
TABLE_WIDTH = 200
ANSWER_WIDTH = 80
RESULTS_VERSION = 1
EXIT_OK, EXIT_WORSE, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130
EVAL_USER = "reactbot eval"
NO_APPROVER = "an eval run has nobody to approve actions: denied"


class EvalError(ReactbotError):
    """What stops ``reactbot eval`` before it starts, in one line (exit 2)."""


# ---- reading files ----------------------------------------------------------------------


def read_cases(path: Path) -> list[Case]:
    """The cases of a ``.jsonl`` (one JSON object a line) or ``.yaml``/``.yml`` file (a list
    of cases); ``CaseError`` names the file, line and field of the first bad one."""
    text = _read_text(path, "case file")
    try:
        entries = _yaml_entries(text) if path.suffix.lower() in (".yaml", ".yml") else None
        if entries is None:
            entries = _jsonl_entries(text)
        if not entries:
            raise CaseError("no cases in the file")
        if len(entries) > MAX_CASES:
            raise CaseError(f"{len(entries):,} cases; the limit is {MAX_CASES:,}")
        cases = [parse_case(e, line=line, number=i) for i, (line, e) in enumerate(entries, 1)]
        check_unique(cases)
        cases = [_with_files(case, path.parent) for case in cases]
    except CaseError as exc:
        raise CaseError(f"{path}: {exc}") from None
    return cases


def _with_files(case: Case, folder: Path) -> Case:
    """``case`` with its ``files`` as paths that exist (relative ones from the case file's
    folder); a missing one is refused here, before any run."""
    found = []
    for name in case.files:
        path = Path(name).expanduser()
        path = path if path.is_absolute() else folder / path
        if not path.is_file():
            raise CaseError(f"line {case.line}: files: {name!r} is not a file")
        found.append(str(path))
    return replace(case, files=tuple(found))


def attached(paths: Sequence[str], read: dict[str, list[Passage]]) -> list[Passage]:
    """The lookup passages of the files a case attaches, each file read once per eval
    (``read``) and cited by its name, as a file attached in a chat is."""
    passages: list[Passage] = []
    for name in paths:
        if name not in read:
            try:
                data = Path(name).read_bytes()
                read[name] = passages_of(Path(name).name, extract(Path(name).name, data))
            except (OSError, FileRefused) as exc:
                raise EvalError(f"cannot read the attached file {name}: {exc}") from exc
        passages += read[name]
    return passages


def _read_text(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > FILE_BYTES:
            raise EvalError(f"{path}: the {what} is {size:,} bytes; the limit is {FILE_BYTES:,}")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EvalError(f"{path}: the {what} is not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise EvalError(f"cannot read the {what} {path}: {exc.strerror or exc}") from exc


def _jsonl_entries(text: str) -> list[tuple[int, object]]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue  # blank lines and comments, so a file can be kept tidy
        try:
            entries.append((number, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            where = f" (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
            raise CaseError(f"line {number}: not a JSON object{where}") from None
    return entries


def _yaml_entries(text: str) -> list[tuple[int, object]]:
    try:
        _refuse_aliases(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise CaseError(f"{line}not valid YAML ({exc.problem})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise CaseError(f"not valid YAML ({type(exc).__name__})") from None
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        raise CaseError(f"line {node.start_mark.line + 1}: the file must be a list of cases")
    entries = []
    for item in node.value:
        try:
            value = yaml.SafeLoader("").construct_document(item)
        except (yaml.YAMLError, RecursionError):
            raise CaseError(f"line {item.start_mark.line + 1}: not a usable case") from None
        entries.append((item.start_mark.line + 1, value))
    return entries


def _refuse_aliases(text: str) -> None:
    """Aliases can make a small file expand to gigabytes (billion laughs): cases need none."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            line = f"line {event.start_mark.line + 1}: " if event.start_mark is not None else ""
            raise CaseError(f"{line}YAML aliases (*name) are not used in case files")


def read_baseline(path: Path) -> Baseline:
    text = _read_text(path, "baseline")
    try:
        data = json.loads(text)
        runs = [_baseline_run(item) for item in data["runs"]]
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
        raise EvalError(
            f"{path}: not a results.json written by reactbot eval ({type(exc).__name__})"
        ) from None
    return Baseline(runs)


def _baseline_run(item: dict[str, Any]) -> BaselineRun:
    combination = Combination(str(item["model"]), str(item["mode"]), str(item.get("prompt", "")))
    return BaselineRun(str(item["case"]), combination, item["verdict"] == "pass")


def parse_accuracy(text: str) -> float:
    """``--min-accuracy``: a fraction (0.9) or a percentage (90%)."""
    raw = text.strip()
    try:
        value = float(raw.removesuffix("%")) / (100 if raw.endswith("%") else 1)
    except ValueError:
        raise EvalError(f"--min-accuracy {text}: not a number (say 0.9 or 90%)") from None
    if not 0 <= value <= 1:
        raise EvalError(f"--min-accuracy {text}: must be between 0 and 1 (or 0% and 100%)")
    return value


# ---- running ----------------------------------------------------------------------------


@dataclass(slots=True)
class Setup:
    """A combination's agent and model, ready to run cases."""

    combination: Combination
    agent: Agent
    model: ChatModel | None
    """None: the agent's own model (and its answer model)."""
    mode: Mode


@dataclass(frozen=True, slots=True)
class Job:
    setup: Setup
    case: Case
    repeat: int


@dataclass(slots=True)
class Eval:
    """Runs the jobs, at most ``concurrency`` at once; ``stop`` (Ctrl-C) ends the runs in
    flight and starts no more, and ``results`` keeps the runs that finished."""

    app: App
    jobs: list[Job]
    concurrency: int
    on_result: Callable[[RunResult], None] = lambda _: None
    results: list[RunResult] = field(default_factory=list)
    stopped: bool = False
    _runs: set[Any] = field(default_factory=set)
    _files: dict[str, list[Passage]] = field(default_factory=dict)

    async def run(self) -> list[RunResult]:
        queue = iter(self.jobs)
        workers = [
            self._worker(queue) for _ in range(max(1, min(self.concurrency, len(self.jobs))))
        ]
        await asyncio.gather(*workers)
        return self.results

    def stop(self) -> None:
        self.stopped = True
        for run in list(self._runs):
            run.cancel("you (Ctrl-C)")

    async def _worker(self, queue: Iterator[Job]) -> None:
        for job in queue:
            if self.stopped:
                return
            result = await self._one(job)
            if result is not None:
                self.results.append(result)
                self.on_result(result)

    async def _one(self, job: Job) -> RunResult | None:
        """The run's result, or None when Ctrl-C stopped it (it did not finish)."""
        setup, case = job.setup, job.case
        tools = _case_tools(setup.agent.tools, case)
        if case.files:
            files = attached(case.files, self._files)
            tools = registry_with_files(tools or setup.agent.tools, files)
        person = eval_person(job) if setup.agent.memories is not None else None
        try:
            for n, question in enumerate(case.before):  # each in a conversation of its own
                await self._ask(job, question, tools, person and person.elsewhere(n))
            final = await self._ask(job, case.question, tools, person)
        finally:
            if person is not None and setup.agent.memories is not None:
                for holder in person.holders(len(case.before)):  # none left behind
                    await setup.agent.memories.store.clear(holder)
        if self.stopped and final.trace.status == "cancelled":
            return None
        return result_of(job, final.trace)

    async def _ask(
        self, job: Job, question: str, tools: ToolRegistry | None, person: EvalPerson | None
    ) -> FinalEvent:
        setup = job.setup
        run = setup.agent.start(
            question,
            user=EVAL_USER,
            mode=setup.mode,
            model=setup.model,
            tools=tools,
            asking=person.asking if person is not None else None,
        )
        self._runs.add(run)
        try:
            async for event in run.events():
                if isinstance(event, ApprovalRequested):  # nobody is there to decide
                    key = (run.trace.id, event.step, event.call)
                    await self.app.broker.decide(
                        key, Decision("deny", EVAL_USER, reason=NO_APPROVER)
                    )
            return await run.wait()
        finally:
            self._runs.discard(run)


@dataclass(frozen=True, slots=True)
class EvalPerson:
    """The person one job asks as: their own id, so jobs run at once never share memories."""

    asking: Asking

    @property
    def holder(self) -> Holder:
        return Holder.person(EVAL_PLATFORM, self.asking.user)

    def holders(self, before: int) -> list[Holder]:
        """Every holder a job of ``before`` earlier questions may have written: the person's,
        and each of its places' (``memory.channel_writers: anyone`` lets it keep those)."""
        places = [self, *(self.elsewhere(n) for n in range(before))]
        return [self.holder, *(Holder.channel(p.asking.where) for p in places)]

    def elsewhere(self, n: int) -> EvalPerson:
        """The same person in another channel of the same space (a ``before`` question)."""
        where = replace(self.asking.where, place=f"{self.asking.where.place}:before-{n}")
        return EvalPerson(replace(self.asking, where=where))


EVAL_PLATFORM = "eval"


def eval_person(job: Job) -> EvalPerson:
    ident = f"{job.setup.combination.label}:{job.case.id}:{job.repeat}:{secrets.token_hex(3)}"
    where = Where(EVAL_PLATFORM, "eval", f"eval:{ident}", private=False)
    return EvalPerson(Asking(ident, EVAL_USER, False, where))


def _case_tools(tools: ToolRegistry, case: Case) -> ToolRegistry | None:
    if case.tools is None:
        return None
    chosen = ToolRegistry()
    for name in case.tools:
        tool = tools.get(name)
        if tool is not None:
            chosen.add(tool)
    return chosen


def result_of(job: Job, trace: Trace) -> RunResult:
    answered = trace.status in ("answered", "refused", "best_effort", "unformatted")
    answer = trace.answer if answered else None
    expected = job.case.expect.source
    rank = None if expected is None else source_rank(expected, _first_lookup(trace))
    passed = trace.status != "unformatted" and check(job.case.expect, answer)
    return RunResult(
        case=job.case.id,
        combination=job.setup.combination,
        repeat=job.repeat,
        answer=trace.answer,
        status=trace.status,
        passed=passed and (expected is None or rank is not None),
        steps=trace.step_count,
        format_errors=sum(1 for s in trace.steps if s.kind == "format_error"),
        tokens_in=trace.prompt_tokens,
        tokens_out=trace.completion_tokens,
        cost_usd=trace.cost_usd,
        seconds=trace.seconds,
        trace_id=trace.id,
        reason=None if answered else trace.reason,
        wants_source=expected is not None,
        source_rank=rank,
    )


def _first_lookup(trace: Trace) -> list[str]:
    """The sources of the run's first lookup, best first (none: the run looked nothing up)."""
    for step in trace.steps:
        if step.action == "lookup" and step.error is None:
            return step.sources
    return []


def missing_tools(cases: Sequence[Case], tools: ToolRegistry) -> str | None:
    """The first case naming a tool that is not configured, said in one line."""
    for case in cases:
        for name in case.tools or ():
            if tools.get(name) is None:
                known = ", ".join(tools.names) or "none"
                return (
                    f"line {case.line}: tools: {name!r} is not a configured tool "
                    f"(configured: {known})"
                )
    return None


def agent_for(app: App, prompt: str | None, *, model: str | None = None) -> Agent:
    """The app's Agent for the built-in prompt; for a ``--prompt``, the same Agent's parts
    with that system prompt (as ``trace replay --prompt`` does). Neither keeps a
    conversation's history: each case is asked on its own. With ``model`` (a ``--model``
    name), it knows that model's price alone (``picked_model_price``): prices are kept by
    model name, and a name outside the catalogue must not borrow an entry's."""
    base = app.agent
    prices = base.prices
    if model is not None:
        from bot.config import picked_model_price

        price = picked_model_price(app.config, model)
        runs_as = app.catalogue[model].name if model in app.catalogue else model
        prices = {runs_as: price} if price is not None else {}
    settings = base.settings if prompt is None else replace(base.settings, system_prompt=prompt)
    return Agent(
        base.model,
        base.tools,
        traces=base.traces,
        answer_model=base.answer_model,
        settings=settings,
        approve=base.approve,
        observers=base.observers,
        prices=prices,
        memories=base.memories,
    )


# ---- showing ----------------------------------------------------------------------------


def summary_table(summaries: Sequence[Summary], *, prompts: bool) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    heads = ["model", "mode", *(["prompt"] if prompts else []), "accuracy", "format errors"]
    sourced = any(s.sourced for s in summaries)
    heads += [f"recall@{RECALL_AT}", "MRR"] if sourced else []
    heads += ["steps", "tokens in/out", "cost", "p50", "p95"]
    for head in heads:
        left = head in ("model", "mode", "prompt")
        table.add_column(head, justify="left" if left else "right", no_wrap=True)
    for s in summaries:
        c = s.combination
        row = [
            one_line(c.model, 40),
            c.mode,
            *([one_line(c.prompt or "built-in", 40)] if prompts else []),
        ]
        row += [
            f"{s.accuracy:.1%}",
            f"{s.unformatted} / {s.reasked}",
            *([f"{s.recall:.2f}", f"{s.mrr:.2f}"] if sourced else []),
            f"{s.mean_steps:.1f}",
            f"{s.tokens_in:,}/{s.tokens_out:,}",
            format_usd(s.cost_usd) if s.cost_usd is not None else "—",
            seconds_text(s.p50),
            seconds_text(s.p95),
        ]
        table.add_row(*(printable(cell) for cell in row))
    return table


def failure_lines(results: Sequence[RunResult], cases: dict[str, Case]) -> list[str]:
    lines = []
    for r in results:
        if r.passed:
            continue
        case = cases[r.case]
        if r.answer is not None and r.status != "failed":
            said = f'answered "{one_line(r.answer, ANSWER_WIDTH)}"'
        else:
            said = f"{r.status}: {one_line(r.reason or 'no answer', ANSWER_WIDTH)}"
        if r.status == "unformatted":
            said = f'unformatted reply "{one_line(r.answer or "", ANSWER_WIDTH)}"'
        again = f" (repeat {r.repeat + 1})" if r.repeat else ""
        lines.append(
            f'failed: {r.combination.label} "{case.id}"{again} {said} '
            f"(want {case.expect.describe()}) · trace {r.trace_id}"
        )
    return [printable(line) for line in lines]


def regression_lines(found: Sequence[Regression]) -> list[str]:
    return [
        printable(
            f'regression: "{r.case}" passed in the baseline and fails now on '
            f"{r.combination.label} · trace {r.trace_id}"
        )
        for r in found
    ]


def results_document(
    *,
    file: str,
    started_at: float,
    summaries: Sequence[Summary],
    results: Sequence[RunResult],
    found: Sequence[Regression],
    interrupted: bool,
    planned: int,
) -> dict[str, Any]:
    return {
        "version": RESULTS_VERSION,
        "file": file,
        "started_at": started_at,
        "interrupted": interrupted,
        "planned_runs": planned,
        "accuracy": round(overall_accuracy(results), 6),
        "combinations": [s.to_dict() for s in summaries],
        "runs": [r.to_dict() for r in results],
        "regressions": [
            {"case": r.case, **r.combination.to_dict(), "trace_id": r.trace_id} for r in found
        ],
    }


class EvalProgress:
    """A bar on a terminal; piped, nothing until the one line at the end."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.failed = 0
        self._bar: Progress | None = None
        self._task: Any = None
        self._started = time.monotonic()

    def __enter__(self) -> EvalProgress:
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("eval", total=self.total, failed=0)
        return self

    def advance(self, result: RunResult) -> None:
        self.done += 1
        self.failed += not result.passed
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        seconds = time.monotonic() - self._started
        self.console.print(
            f"eval: {self.done} of {self.total} runs finished, {self.failed} failed, "
            f"in {seconds:.1f} s",
            style="dim",
            markup=False,
            soft_wrap=True,
        )


# ---- the command ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvalOptions:
    file: str
    models: tuple[str, ...] = ()
    modes: tuple[Mode, ...] = ()
    prompts: tuple[str, ...] = ()
    repeat: int = 1
    concurrency: int = 4
    out: str | None = None
    baseline: str | None = None
    min_accuracy: str | None = None


def options_of(args: Any) -> EvalOptions:
    """The parsed ``reactbot eval`` arguments."""
    return EvalOptions(
        file=args.file,
        models=tuple(args.model),
        modes=tuple(args.mode),
        prompts=tuple(args.prompt),
        repeat=args.repeat,
        concurrency=args.concurrency,
        out=args.out,
        baseline=args.baseline,
        min_accuracy=args.min_accuracy,
    )


@dataclass(slots=True)
class _Plan:
    cases: list[Case]
    setups: list[Setup]
    baseline: Baseline | None
    min_accuracy: float | None
    opened: list[ChatModel]


async def eval_command(app: App, options: EvalOptions, console: Console, errors: Console) -> int:
    """``reactbot eval``: see the module's docstring for the exit codes."""
    try:
        plan = _plan(app, options)
    except (EvalError, CaseError) as exc:
        errors.print(printable(str(exc)), style="red", markup=False)
        return EXIT_UNUSABLE
    try:
        await app.start()  # MCP tools, which a case may name
        for note in app.notes:
            errors.print(f"note: {printable(note)}", style="dim", markup=False)
        problem = missing_tools(plan.cases, app.tools)
        if problem is not None:
            errors.print(printable(f"{options.file}: {problem}"), style="red", markup=False)
            return EXIT_UNUSABLE
        return await _run_plan(app, plan, options, console, errors)
    finally:
        for model in plan.opened:
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()


def _plan(app: App, options: EvalOptions) -> _Plan:
    from bot.trace_commands import ReplayError, read_prompt, replay_model

    if options.repeat < 1 or options.repeat > 1000:
        raise EvalError(f"--repeat {options.repeat}: must be between 1 and 1000")
    if options.concurrency < 1 or options.concurrency > 64:
        raise EvalError(f"--concurrency {options.concurrency}: must be between 1 and 64")
    minimum = parse_accuracy(options.min_accuracy) if options.min_accuracy is not None else None
    cases = read_cases(Path(options.file))
    baseline = read_baseline(Path(options.baseline)) if options.baseline else None
    prompts: list[tuple[str, str | None]] = [("", None)]
    opened: list[ChatModel] = []
    try:
        if options.prompts:
            prompts = [(p, read_prompt(p)) for p in dict.fromkeys(options.prompts)]
        chosen: list[tuple[str, ChatModel | None]] = []
        for name in dict.fromkeys(options.models):
            model, _, opened_here = replay_model(app, name)
            if opened_here:
                opened.append(model)
            chosen.append((name, model))
    except ReplayError as exc:
        raise EvalError(str(exc)) from None
    if not chosen:
        chosen = [(app.model.name, None)]
    modes = list(dict.fromkeys(options.modes)) or [app.agent.settings.mode]
    setups = []
    for prompt_name, prompt_text in prompts:
        for model_name, picked in chosen:
            agent = agent_for(app, prompt_text, model=model_name if picked else None)
            for mode in modes:
                combination = Combination(model_name, mode, prompt_name)
                setups.append(Setup(combination, agent, picked, mode))
    return _Plan(cases, setups, baseline, minimum, opened)


async def _run_plan(
    app: App, plan: _Plan, options: EvalOptions, console: Console, errors: Console
) -> int:
    from adapters.terminal.chat import on_interrupt

    jobs = [
        Job(setup, case, repeat)
        for setup in plan.setups
        for case in plan.cases
        for repeat in range(options.repeat)
    ]
    started_at = time.time()
    with EvalProgress(errors, len(jobs)) as progress:
        runner = Eval(app, jobs, options.concurrency, on_result=progress.advance)
        with on_interrupt(runner.stop):
            await runner.run()
    results = _in_plan_order(runner.results, jobs)
    summaries = [summarise(s.combination, results) for s in plan.setups]
    found = regressions(plan.baseline, results) if plan.baseline is not None else []
    _show(console, summaries, results, found, plan, prompts=bool(options.prompts))
    if runner.stopped:
        errors.print(
            f"Stopped by Ctrl-C: {len(results)} of {len(jobs)} runs finished; "
            "the results below hold only those.",
            style="yellow",
            markup=False,
        )
    if options.out is not None:
        document = results_document(
            file=options.file,
            started_at=started_at,
            summaries=summaries,
            results=results,
            found=found,
            interrupted=runner.stopped,
            planned=len(jobs),
        )
        written = write_outputs(app, Path(options.out), document, summaries, results, plan.cases)
        if written is not None:
            errors.print(printable(written), style="red", markup=False)
            return EXIT_UNUSABLE
        console.print(
            printable(f"Wrote {Path(options.out) / 'results.json'} and report.html"),
            style="dim",
            markup=False,
        )
    return _exit_code(runner.stopped, found, results, plan.min_accuracy, console)


def _in_plan_order(results: Sequence[RunResult], jobs: Sequence[Job]) -> list[RunResult]:
    """Runs finish in any order; files and tables list them as planned."""
    order = {(j.setup.combination, j.case.id, j.repeat): i for i, j in enumerate(jobs)}
    return sorted(results, key=lambda r: order[(r.combination, r.case, r.repeat)])


def _show(
    console: Console,
    summaries: Sequence[Summary],
    results: Sequence[RunResult],
    found: Sequence[Regression],
    plan: _Plan,
    *,
    prompts: bool,
) -> None:
    # Piped, the console is 80 columns: a table row stays one line whatever its width.
    shown = console
    if not console.is_terminal:
        shown = Console(file=console.file, width=TABLE_WIDTH, color_system=None, highlight=False)
    shown.print(summary_table(summaries, prompts=prompts), soft_wrap=False)
    failures = failure_lines(results, {c.id: c for c in plan.cases})
    for line in failures[:FAILURES_SHOWN]:
        console.print(line, markup=False, soft_wrap=True)
    if len(failures) > FAILURES_SHOWN:
        console.print(
            f"({len(failures) - FAILURES_SHOWN} more failed runs: see --out)", markup=False
        )
    for line in regression_lines(found):
        console.print(line, style="bold red", markup=False, soft_wrap=True)


def _exit_code(
    stopped: bool,
    found: Sequence[Regression],
    results: Sequence[RunResult],
    minimum: float | None,
    console: Console,
) -> int:
    if stopped:
        return EXIT_INTERRUPTED
    code = EXIT_OK
    if found:
        console.print(
            f"{len(found)} regression(s) against the baseline.", style="bold red", markup=False
        )
        code = EXIT_WORSE
    accuracy = overall_accuracy(results)
    if minimum is not None and accuracy < minimum:
        console.print(
            f"Accuracy {accuracy:.1%} is below --min-accuracy {minimum:.1%}.",
            style="bold red",
            markup=False,
        )
        code = EXIT_WORSE
    return code


def write_outputs(
    app: App,
    out: Path,
    document: dict[str, Any],
    summaries: Sequence[Summary],
    results: Sequence[RunResult],
    cases: Sequence[Case],
) -> str | None:
    """``results.json`` and ``report.html`` in ``out``; the reason when they cannot be."""
    from bot.web import LinkSigner
    from bot.web.report import render_report

    signer = LinkSigner.from_config(app.config)
    links = {r.trace_id: signer.link(r.trace_id) for r in results} if signer.enabled else {}
    try:
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        (out / "results.json").write_text(text, encoding="utf-8")
        html = render_report(document, summaries, results, {c.id: c for c in cases}, links=links)
        (out / "report.html").write_text(html, encoding="utf-8")
    except OSError as exc:
        return f"cannot write the results to {out}: {exc.strerror or exc}"
    return None
