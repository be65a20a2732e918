"""The ``reactbot`` command line: ask, chat, serve, tools, trace, eval, schedule.

``main()`` in ``bot/__main__.py`` is the only place that calls ``asyncio.run``.

Start-up is part of the product (``bench/startup.py``): this module imports only what parsing
the command line needs, and each command imports its own code once it is chosen, so
``--help`` loads no config model, agent or terminal UI, and ``ask`` no trace-reading code.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bot.memory_command import add_memory_parser, memory_command
from bot.platforms import PLATFORMS

if TYPE_CHECKING:
    from rich.console import Console

    from bot.app import App
    from bot.config import RedisConfig
    from core.events import Mode

DEFAULT_CONVERSATION = "terminal"
MODES = ("text", "tools", "json")
CONFIG_HELP = "YAML config file (default: $REACTBOT_CONFIG)"
CONVERSATION_HELP = (
    "the conversation whose history the question continues (default: terminal); it lasts "
    "across commands only with Redis (REDIS_URL)"
)
MODE_HELP = (
    "how the model is asked for its steps: ReAct text, native tool calls or a JSON object "
    "(default: agent.mode, text)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reactbot",
        description="A ReAct bot that shows its work. With no command: serve the configured "
        "platforms, or chat in this terminal when none is configured.",
    )
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action=_VersionAction)
    # --config is accepted after the subcommand too; SUPPRESS keeps the global one otherwise.
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", default=argparse.SUPPRESS, help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = sub.add_parser(
        "ask",
        parents=[config],
        help="answer one question, streaming the reasoning",
        description="Answer one question, printing each Thought, Action and Observation as "
        "it happens, then the Answer. Exit 0 when answered, 1 with a one-line reason "
        "otherwise.",
    )
    ask.add_argument(
        "question",
        nargs="*",
        metavar="QUESTION",
        help="the question (several words are joined with spaces; quoting is optional, and "
        "a question may start with '-')",
    )
    ask.add_argument("--conversation", metavar="ID", help=CONVERSATION_HELP)
    ask.add_argument("--mode", choices=MODES, help=MODE_HELP)
    ask.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH",
        type=Path,
        help="read this file (text, Markdown, PDF, HTML, CSV or code) into the conversation "
        "first, as an attachment on a platform; lookup searches it (repeatable)",
    )
    ask.add_argument(
        "--approve",
        choices=("yes", "no"),
        help="decide every action that needs approval without asking (for scripts); "
        "without it, a terminal asks, and piped input denies with a note",
    )

    chat = sub.add_parser("chat", parents=[config], help="interactive terminal chat")
    chat.add_argument("--conversation", metavar="ID", help=CONVERSATION_HELP)
    chat.add_argument("--mode", choices=MODES, help=MODE_HELP)

    serve = sub.add_parser(
        "serve",
        parents=[config],
        help="run the configured platforms ("
        + ", ".join(p.title for p in PLATFORMS)
        + "); --platform NAME runs one",
    )
    serve.add_argument("--platform", choices=[p.name for p in PLATFORMS])

    sub.add_parser(
        "tools",
        parents=[config],
        help="list every tool (built-in or from which MCP server), its input and whether it "
        "needs approval; exit 1 when an MCP server is not up",
    )

    trace = sub.add_parser("trace", parents=[config], help="read stored traces")
    trace.set_defaults(trace_help=trace.format_help)
    tsub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    tlist = tsub.add_parser(
        "list",
        parents=[config],
        help="recent traces, newest first: of every conversation, or of one",
    )
    tlist.add_argument(
        "--conversation", metavar="ID", help="only this conversation's traces (default: all)"
    )
    tlist.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    tshow = tsub.add_parser("show", parents=[config], help="print one trace as Markdown")
    tshow.add_argument("trace_id", metavar="ID")
    texport = tsub.add_parser(
        "export", parents=[config], help="write a trace to FILE (.json or .md)"
    )
    texport.add_argument("trace_id", metavar="ID")
    texport.add_argument("file", metavar="FILE")
    # trace replay / trace diff (issue 15): the work is in bot/trace_commands.py
    treplay = tsub.add_parser(
        "replay",
        parents=[config],
        help="ask a stored trace's question again with another model, mode or system prompt, "
        "answering the tool calls it made from the trace; compare the two runs",
    )
    treplay.add_argument("trace_id", metavar="ID")
    treplay.add_argument(
        "--model", help="a model name on the configured endpoint (default: the configured model)"
    )
    treplay.add_argument("--mode", choices=MODES, help="as in ask (default: the trace's mode)")
    treplay.add_argument(
        "--prompt",
        metavar="FILE",
        help="a system prompt to use instead of the built-in one; {tools} in it stands for "
        "the list of tools",
    )
    treplay.add_argument(
        "--live-tools",
        action="store_true",
        help="run tool calls the trace does not hold (without it, the replay stops at the first)",
    )
    tdiff = tsub.add_parser("diff", parents=[config], help="compare two stored traces step by step")
    tdiff.add_argument("trace_a", metavar="A")
    tdiff.add_argument("trace_b", metavar="B")
    _add_eval_parser(sub, config)
    add_memory_parser(sub, config)
    _add_schedule_parser(sub, config)
    return parser


def _add_schedule_parser(
    sub: argparse._SubParsersAction[Any], config: argparse.ArgumentParser
) -> None:
    schedule = sub.add_parser(
        "schedule",
        parents=[config],
        help="scheduled questions: add, list, pause, resume, delete, run (needs Redis)",
        description="Questions the bot asks on its own at set times, once across every "
        'serving process. WHEN is a cron expression and a zone ("0 9 * * MON '
        'Europe/Paris") or a phrase: "every day 09:00 Europe/Paris", "every monday 09:00 '
        'Europe/Paris", "every 2 hours", "in 30 minutes", "at 2026-12-24 18:00 Europe/Paris".',
    )
    schedule.set_defaults(schedule_help=schedule.format_help)
    ssub = schedule.add_subparsers(dest="schedule_command", metavar="SUBCOMMAND")
    add = ssub.add_parser("add", parents=[config], help="add a schedule; prints its next runs")
    add.add_argument("when", metavar="WHEN", help="when it runs (quote it)")
    add.add_argument("question", nargs="+", metavar="QUESTION", help="what to ask")
    _place_options(add, required=True)
    listing = ssub.add_parser("list", parents=[config], help="every schedule, or one place's")
    _place_options(listing, required=False)
    for name, text in (
        ("pause", "stop running it until resumed"),
        ("resume", "run it again from its next time"),
        ("delete", "delete it"),
        ("run", "run it now, once (the next serving process to look takes it)"),
    ):
        sub_command = ssub.add_parser(name, parents=[config], help=text)
        sub_command.add_argument("schedule_id", metavar="ID")


def _place_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--platform", required=required, choices=[p.name for p in PLATFORMS], help="where it posts"
    )
    parser.add_argument(
        "--channel",
        required=required,
        help="the channel (Slack, Discord) or chat (Telegram) id it posts in",
    )
    parser.add_argument("--thread", default="", help="a thread or forum topic in it")


def _add_eval_parser(sub: argparse._SubParsersAction[Any], config: argparse.ArgumentParser) -> None:
    evals = sub.add_parser(
        "eval",
        parents=[config],
        help="ask every case of a case file, for each model, mode and prompt; a table per "
        "combination, the failures, and with --out results.json and report.html",
        description="Run every case of FILE (JSONL or YAML) for each combination of --model, "
        "--mode and --prompt, --repeat times. Exit 0 when all is well; 1 on a regression "
        "against --baseline or an accuracy below --min-accuracy; 2 when the eval cannot "
        "start; 130 when stopped by Ctrl-C (what finished is still shown and written).",
    )
    evals.add_argument("file", metavar="FILE", help="the cases: a .jsonl or .yaml file")
    evals.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="a catalogue name (models:) or a model on the configured endpoint; repeat it "
        "to compare models (default: the configured model)",
    )
    evals.add_argument(
        "--mode", action="append", default=[], choices=MODES, help="repeat it to compare modes"
    )
    evals.add_argument(
        "--prompt",
        action="append",
        default=[],
        metavar="FILE",
        help="a system prompt instead of the built-in one ({tools} stands for the tools); "
        "repeat it to compare prompts",
    )
    evals.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per case (1)")
    evals.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="runs at once (default 4)"
    )
    evals.add_argument("--out", metavar="DIR", help="write results.json and report.html here")
    evals.add_argument(
        "--baseline",
        metavar="RESULTS.json",
        help="an earlier results.json: a case that passed there and fails now is a "
        "regression (exit 1)",
    )
    evals.add_argument(
        "--min-accuracy",
        metavar="X",
        help="exit 1 when the share of runs that pass is below X (0.9 or 90%%)",
    )


def _version() -> str:
    import importlib.metadata  # reading the installed metadata costs every start-up otherwise

    try:
        return importlib.metadata.version("reactbot")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse._VersionAction):
    """``--version``, looking the version up only when it is asked for."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        self.version = f"%(prog)s {_version()}"
        super().__call__(parser, namespace, values, option_string)


_ASK_OPTIONS_WITH_VALUE = frozenset({"--conversation", "--mode", "--approve", "--config", "--file"})
_GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--config"})
_LONG_OPTION = re.compile(r"--[a-z][a-z-]*(=.*)?")


def question_args(argv: Sequence[str]) -> list[str]:
    """``argv`` with the words of an ``ask`` question after a ``--``, so that a question
    starting with ``-`` (``ask -5+3``) is read as the question, not as an option.

    Options of ``ask`` may come before or after the question; a word that looks like a long
    option but is none stays where it is, so argparse names the typo."""
    args = list(argv)
    at = _command_index(args)
    if at is None or args[at] != "ask":
        return args
    options: list[str] = []
    words: list[str] = []
    rest = iter(args[at + 1 :])
    for word in rest:
        if word == "--":
            words.extend(rest)
            break
        name = word.split("=", 1)[0]
        if name in _ASK_OPTIONS_WITH_VALUE:
            options.append(word)
            if "=" not in word:
                options.extend(itertools.islice(rest, 1))
        elif word in ("-h", "--help") or _LONG_OPTION.fullmatch(word):
            options.append(word)
        else:
            words.append(word)
    return [*args[: at + 1], *options, "--", *words]


def _command_index(args: Sequence[str]) -> int | None:
    """Where the subcommand is in ``args``: the first word that is no global option."""
    skip = False
    for index, word in enumerate(args):
        if skip:
            skip = False
        elif word in _GLOBAL_OPTIONS_WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            return index
    return None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line read; ``--help``, ``--version`` and a usage error exit here (0 or 2)."""
    return build_parser().parse_args(question_args(argv))


async def run_cli(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    parsed: argparse.Namespace | None = None,
) -> int:
    """Run the command ``argv`` names; ``parsed``: ``parse_args(argv)``, when the caller has
    read it already (bot/__main__.py does, before asyncio is imported)."""
    env = os.environ if env is None else env
    args = parse_args(argv) if parsed is None else parsed
    from rich.console import Console

    from adapters.terminal.chat import Approvals, ask, chat
    from bot.app import App
    from bot.config import ConfigError, load_config
    from bot.logs import setup_logging
    from bot.platforms import enabled as enabled_platforms
    from bot.versions import warn_outside_ranges

    if not gc.isenabled():  # bot/__main__.py turned it off for the imports above
        gc.freeze()  # what they made lives as long as the process: never walk it again
        gc.enable()
    console = Console(file=stdout or sys.stdout, highlight=False, soft_wrap=True)
    errors = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    for shown in (console, errors):  # a terminal wraps at words; piped lines stay whole
        shown.soft_wrap = not shown.is_terminal
    if args.command == "trace" and args.trace_command is None:
        console.print(args.trace_help(), markup=False, end="")
        return 0
    question = " ".join(getattr(args, "question", None) or ()).strip()
    if args.command == "ask" and not question:
        errors.print('empty question: say what to ask, e.g. reactbot ask "What is 6*7?"')
        return 1
    try:
        config = load_config(args.config, env)
    except ConfigError as exc:
        errors.print(str(exc), markup=False)
        if args.command == "serve":
            from bot.serve import config_error_waiting_line, wait_for_sigterm, wants_to_wait

            if wants_to_wait(env):  # a supervisor would restart it into the same error
                return await wait_for_sigterm(errors, config_error_waiting_line())
        return 2
    interactive = args.command in (None, "chat", "ask", "tools", "eval")
    quiet = interactive or args.command in ("trace", "memory", "schedule")
    setup_logging(config, verbose=args.verbose, quiet=quiet)
    command = args.command or ("serve" if enabled_platforms(config) else "chat")
    if command in ("serve", "chat"):  # the long-lived ones; ~30 ms that `ask` need not pay
        warn_outside_ranges()
    if command == "serve":
        from bot.serve import serve, wants_to_wait

        platform = getattr(args, "platform", None)
        return await serve(config, platform=platform, console=errors, wait=wants_to_wait(env))
    tty = console.is_terminal
    app = App.create(config, demo_delay=0.015 if tty and command != "eval" else 0.0)
    try:
        if command == "eval":  # the work is in bot/evals.py
            from bot.evals import eval_command, options_of

            return await eval_command(app, options_of(args), console, errors)
        if command == "memory":  # the store alone, like traces
            with _quiet_store_warnings(unless=args.verbose):
                return await memory_command(app, args, console, errors)
        if command == "schedule":  # the work is in bot/schedule_command.py
            from bot.schedule_command import schedule_command

            return await schedule_command(app, args, console, errors)
        if command == "trace":  # reading stored traces needs no tool, model or note
            with _quiet_store_warnings(unless=args.verbose):
                return await trace_command(app, args, console, errors)
        await app.start()
        for note in app.notes:  # plain text: a name in a note is shown as written, and no
            # emoji table is loaded for it (~5 ms of every start-up; bench/startup.py)
            errors.print(f"note: {note}", style="dim", markup=False, emoji=False)
        chosen = getattr(args, "conversation", None)
        conversation = chosen or DEFAULT_CONVERSATION
        mode: Mode | None = getattr(args, "mode", None)
        people = Approvals(app, console, stdin or sys.stdin, flag=getattr(args, "approve", None))
        if command == "ask":
            if chosen is not None and not config.redis.configured:
                errors.print(f"note: {_PROCESS_ONLY_HISTORY}", style="dim", markup=False)
            files = getattr(args, "file", [])
            return await ask(
                app, question, conversation, console, mode=mode, people=people, files=files
            )
        if command == "chat":
            if args.command is None:  # `make run` with nothing configured
                errors.print(WEB_CHAT_HINT, style="dim", markup=False)
            return await chat(
                app, conversation, console, stdin or sys.stdin, mode=mode, people=people
            )
        return await tools_command(app, console)
    finally:
        await app.aclose()


WEB_CHAT_HINT = (
    "To watch it think in a browser instead: reactbot serve --platform web, "
    "then open http://127.0.0.1:8080/"
)

_PROCESS_ONLY_HISTORY = (
    "Without Redis, the conversation's history lasts only for this process: this answer "
    "will not be remembered by the next command. Set REDIS_URL to keep it."
)


_NO_REDIS_HINT = (
    "Without Redis, traces live only as long as one process (use /trace and /export in "
    "`reactbot chat`). Set REDIS_URL to keep them across commands."
)


async def tools_command(app: App, console: Console) -> int:
    from adapters.terminal.render import printable
    from bot.tools_command import ServerLine, format_tools, server_lines
    from core.knowledge import LookupTool

    listed = frozenset(name.lower() for name in app.config.agent.approval.tools)
    statuses = (
        ServerLine(s.name, s.transport, s.state, s.reason, s.tools)
        for s in (app.mcp.status() if app.mcp is not None else [])
    )
    servers = server_lines(app.config.tools.mcp.servers, statuses)
    lookup = app.tools.get("lookup") if "lookup" in app.tools.names else None
    sources = await lookup.sources() if isinstance(lookup, LookupTool) else None
    shown = format_tools(app.tools, servers, listed=listed, sources=sources)
    console.print(printable(shown), markup=False)
    return 0 if all(server.working for server in servers) else 1


async def trace_command(
    app: App, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    from adapters.terminal.render import printable
    from bot.trace_commands import export_trace, format_trace_list, print_page_link

    if args.trace_command == "replay":  # replay and diff: see bot/trace_commands.py
        from bot.trace_commands import replay_command

        return await replay_command(
            app,
            console,
            args.trace_id,
            model_name=args.model,
            mode=args.mode,
            prompt_file=args.prompt,
            live_tools=args.live_tools,
        )
    if args.trace_command == "diff":
        from bot.trace_commands import diff_command

        return await diff_command(app, console, args.trace_a, args.trace_b)
    if args.trace_command == "list":
        if args.conversation is None:
            traces = await app.stores.traces.recent(limit=args.limit)
        else:
            traces = await app.stores.traces.list(args.conversation, limit=args.limit)
        if _store_unreachable(app, errors):
            return 1
        text = format_trace_list(traces, conversations=args.conversation is None)
        console.print(printable(text), markup=False)
        if not traces and not app.config.redis.configured:
            console.print(_NO_REDIS_HINT, style="dim", markup=False)
        return 0
    trace = await app.stores.traces.get(args.trace_id)
    if trace is None and _store_unreachable(app, errors):
        return 1
    if trace is None:
        errors.print(f"No stored trace with id {args.trace_id}.", style="red", markup=False)
        if not app.config.redis.configured:
            errors.print(_NO_REDIS_HINT, style="dim", markup=False)
        return 1
    if args.trace_command == "show":
        console.print(printable(trace.to_markdown()), markup=False)
        print_page_link(app.config, console, trace.id)
        return 0
    try:
        path = export_trace(trace, Path(args.file))
    except (OSError, ValueError) as exc:
        errors.print(f"Could not export: {exc}", style="red", markup=False)
        return 1
    console.print(f"Trace {trace.id} written to {path}", markup=False)
    return 0


def _store_unreachable(app: App, errors: Console) -> bool:
    """True, having said so, when Redis did not answer: the traces are not gone, just out of
    reach, and "No stored traces." would say otherwise."""
    if app.health is None or not app.health.degraded or not app.config.redis.configured:
        return False
    errors.print(
        f"cannot reach Redis at {redis_address(app.config.redis)}: stored traces cannot be "
        "read until it answers",
        style="red",
        markup=False,
    )
    return True


@contextlib.contextmanager
def _quiet_store_warnings(*, unless: bool) -> Iterator[None]:
    """The store's "answering without memory" warning is about runs; trace commands say
    "cannot reach Redis" themselves."""
    logger = logging.getLogger("core.resilient")
    previous = logger.level
    if not unless:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)


def redis_address(redis: RedisConfig) -> str:
    """``HOST:PORT`` (or the socket path) of the configured Redis, the sentinels' primary by
    name, or a cluster's first node; never its credentials."""
    if redis.sentinels:
        return f"the primary {redis.sentinel_service!r} of sentinels {', '.join(redis.sentinels)}"
    parts = urlsplit(redis.url or "")
    if redis.cluster:
        return f"the cluster of {parts.hostname or 'localhost'}:{parts.port or 6379}"
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
