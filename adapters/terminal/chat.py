"""The terminal chat and ``reactbot ask``: a question streamed to the console, approvals
asked at the prompt, Ctrl-C stopping the run (not the program), and the chat's commands.

One local person and no platform: the run goes straight to the Agent, with no admission.
``bot/cli.py`` parses the command line and hands over a ``TerminalApp`` (the application).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from rich.console import Console

from adapters import words
from adapters.terminal.render import TerminalRenderer, printable
from core.agent import Agent, Run
from core.approval import ApprovalBroker, Decision
from core.errors import StoreUnavailable
from core.events import ApprovalRequested, FinalEvent, Finished, Mode
from core.file_workers import FileReaders
from core.files import FileLimits
from core.llm import ChatModel
from core.prompt import QUESTION_PREFIX
from core.stores import Stores
from core.stores.resilient import StoreHealth
from core.tools import ToolRegistry
from core.trace import Trace


class TerminalApp(Protocol):
    """What the terminal needs of the application."""

    @property
    def agent(self) -> Agent: ...
    @property
    def broker(self) -> ApprovalBroker: ...
    @property
    def stores(self) -> Stores: ...
    @property
    def model(self) -> ChatModel: ...
    @property
    def health(self) -> StoreHealth | None: ...
    @property
    def file_readers(self) -> FileReaders: ...
    @property
    def files_enabled(self) -> bool: ...

    def file_limits(self) -> FileLimits: ...

    def export(self, trace: Trace, path: Path) -> Path:
        """Write ``trace`` to ``path`` (``.json`` or ``.md``)."""
        ...


async def ask(
    app: TerminalApp,
    question: str,
    conversation: str,
    console: Console,
    *,
    mode: Mode | None = None,
    people: Approvals | None = None,
    files: Sequence[Path] = (),
) -> int:
    """One question; ``files`` are read into the conversation first (``--file``)."""
    if files:
        await attach(app, conversation, files, console)
    final = await _answer(app, question, conversation, console, mode=mode, people=people)
    return 0 if isinstance(final, Finished) else 1


async def attach(
    app: TerminalApp, conversation: str, paths: Sequence[Path], console: Console
) -> None:
    """Reads local files into the conversation through the platforms' intake (its limits,
    its worker processes); says what was read and each refusal in one line."""
    from adapters.terminal.files import LocalFiles, indexed_line  # only with files

    local = LocalFiles(app, app.stores.files, enabled=app.files_enabled)
    intake = await local.take(conversation, paths)
    if read := indexed_line(intake):
        console.print(printable(read), style="dim", markup=False)
    if notice := intake.notice():
        console.print(printable(notice), style="yellow", markup=False)


async def _tools_with_files(app: TerminalApp, conversation: str) -> ToolRegistry | None:
    """The run's tools when the conversation has files (its ``lookup`` searches them too);
    None (the agent's own) when it has none, or they cannot be read now."""
    try:
        if not app.files_enabled or not await app.stores.files.load(conversation):
            return None
    except StoreUnavailable:
        return None
    from adapters.terminal.files import LocalFiles  # only with files

    return await LocalFiles(app, app.stores.files).tools(conversation, app.agent.tools)


async def _answer(
    app: TerminalApp,
    question: str,
    conversation: str,
    console: Console,
    *,
    mode: Mode | None = None,
    people: Approvals | None = None,
) -> FinalEvent:
    """Streams one run to the console; Ctrl-C stops the run, not the program."""
    renderer = TerminalRenderer(console)
    tools = await _tools_with_files(app, conversation)
    run = app.agent.start(question, conversation=conversation, user=_user(), mode=mode, tools=tools)
    with stopped_by_interrupt(run, renderer):
        async for event in run.events():
            renderer.handle(event)
            if isinstance(event, ApprovalRequested):
                event.shown()  # printed: the time to decide starts now
                if people is not None:
                    await people.decide(run, event)
    return await run.wait()


class Approvals:
    """Who decides, in a terminal, on an action that needs approval: ``--approve yes|no``
    for scripts; else the person at the terminal, asked ``[y]es / [e]dit / [n]o / [a]lways``;
    with no terminal to ask on, nobody: denied, with a note saying how to allow it."""

    NO_TERMINAL = "nobody to ask: input is not a terminal; run with --approve yes to allow"

    def __init__(
        self, app: TerminalApp, console: Console, stdin: IO[str], *, flag: str | None
    ) -> None:
        self.app = app
        self.console = console
        self.stdin = stdin
        self.flag = flag

    async def decide(self, run: Run, event: ApprovalRequested) -> None:
        key = (run.trace.id, event.step, event.call)
        decision = await self._decision(run, event)
        if decision is not None:  # None: the run ended (Ctrl-C) while the person thought
            await self.app.broker.decide(key, decision)

    async def _decision(self, run: Run, event: ApprovalRequested) -> Decision | None:
        if self.flag is not None:
            return Decision("approve" if self.flag == "yes" else "deny", "--approve " + self.flag)
        if not (self.stdin.isatty() and self.console.is_terminal):
            self.console.print(f"  {self.NO_TERMINAL}", style="yellow", markup=False)
            return Decision("deny", "reactbot", reason=self.NO_TERMINAL)
        who = _user() or "you"
        choices = "[y]es / [e]dit / [n]o / [a]lways" if event.remember else "[y]es / [e]dit / [n]o"
        while True:
            answer = await self._ask(
                run, f"Run {event.name}[{printable(event.input)}]? {choices} › "
            )
            if answer is None:
                return None
            match answer.strip().lower()[:1]:
                case "y":
                    return Decision("approve", who)
                case "a" if event.remember:
                    return Decision("always", who)
                case "e":
                    edited = await self._ask(run, "input › ", prefill=event.input)
                    return None if edited is None else Decision("edit", who, input=edited.strip())
                case "n":
                    reason = await self._ask(run, "reason (optional) › ")
                    return None if reason is None else Decision("deny", who, reason=reason.strip())

    async def _ask(self, run: Run, prompt: str, *, prefill: str = "") -> str | None:
        """One line from the terminal, or None when the run ended first (Stop, Ctrl-C)."""

        def read() -> str | None:
            with _prefilled(prefill):
                return input(prompt)

        line = asyncio.ensure_future(_read_in_daemon(read))
        ended = asyncio.ensure_future(run.wait())
        done, _ = await asyncio.wait({line, ended}, return_when=asyncio.FIRST_COMPLETED)
        if line in done:
            ended.cancel()
            return line.result()
        line.cancel()
        return None


@contextlib.contextmanager
def _prefilled(text: str) -> Iterator[None]:
    """The next ``input()`` starts with ``text`` already typed (readline), to edit in place."""
    try:
        import readline
    except ImportError:
        yield
        return
    readline.set_startup_hook(lambda: readline.insert_text(text))
    try:
        yield
    finally:
        readline.set_startup_hook(None)


def stopped_by_interrupt(
    run: Run, renderer: TerminalRenderer
) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C stops ``run`` (its notice starting on a line of its own), not the program."""

    def stop() -> None:
        renderer.interrupted()
        run.cancel("you (Ctrl-C)")

    return on_interrupt(stop)


@contextlib.contextmanager
def on_interrupt(handle: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C calls ``handle`` (in the event loop) instead of ending the program."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, handle)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        installed = False
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
            # remove_signal_handler installs Python's default handler; put back asyncio.run's,
            # which turns the next Ctrl-C at the prompt into a clean exit.
            signal.signal(signal.SIGINT, previous)


CHAT_HELP = "/help lists the commands"


async def chat(
    app: TerminalApp,
    conversation: str,
    console: Console,
    stdin: IO[str],
    *,
    mode: Mode | None = None,
    people: Approvals | None = None,
) -> int:
    shown = mode or app.agent.settings.mode
    console.print(
        f"reactbot chat · {app.model.name} · {shown} mode · {CHAT_HELP}", style="dim", markup=False
    )
    session = _ChatSession()
    read = _line_reader(stdin)
    while True:
        line = await read()
        if line is None:  # end of input: Ctrl-D, or Ctrl-C at the prompt
            if console.is_terminal:
                console.print()  # the prompt's line ends here, not in the shell's prompt
            return 0
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            done = await _chat_command(app, text, conversation, console, session)
            if done:
                return 0
            continue
        final = await _answer(app, text, conversation, console, mode=mode, people=people)
        session.last = final.trace


def _line_reader(stdin: IO[str]) -> Callable[[], Awaitable[str | None]]:
    """On a terminal, ``input()`` with readline (arrows, history), and Ctrl-C ends the chat
    like Ctrl-D; otherwise plain lines."""
    if stdin is sys.stdin and stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (importing it enables line editing for input())

        async def prompt() -> str | None:
            with _terminal_restored(stdin):
                return await _read_in_daemon(lambda: input("› "), interruptible=True)

        return prompt
    return lambda: _read_in_daemon(lambda: stdin.readline() or None)  # "" is end of input


@contextlib.contextmanager
def _terminal_restored(stdin: IO[str]) -> Iterator[None]:
    """The terminal's settings as they were, should the prompt be left by Ctrl-C while
    readline (in its thread) has the terminal in its own mode."""
    try:
        import termios

        saved = termios.tcgetattr(stdin.fileno())
    except (ImportError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, termios.error):
            termios.tcsetattr(stdin.fileno(), termios.TCSANOW, saved)


async def _read_in_daemon(
    read: Callable[[], str | None], *, interruptible: bool = False
) -> str | None:
    """One blocking read in a daemon thread: unlike ``asyncio.to_thread``, a thread stuck in
    ``input()`` cannot hold up the exit after Ctrl-C. ``None`` means end of input, which
    Ctrl-C is too when ``interruptible``."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str | None] = loop.create_future()

    def deliver(value: str | None) -> None:
        if not line.done():
            line.set_result(value)

    def work() -> None:
        try:
            value = read()
        except (EOFError, OSError, ValueError):
            value = None
        loop.call_soon_threadsafe(deliver, value)

    reader = threading.Thread(target=work, name="reactbot-stdin", daemon=True)
    if not interruptible:
        reader.start()
        return await line
    with on_interrupt(lambda: deliver(None)):  # before the prompt shows
        reader.start()
        return await line


@dataclass
class _ChatSession:
    last: Trace | None = None
    """The trace of the last question asked in this chat."""
    reset_at: float = 0.0
    """When ``/reset`` was last typed: stored traces from before it are not "the last"."""

    async def last_trace(self, app: TerminalApp, conversation: str) -> Trace | None:
        """This chat's last trace, else the conversation's last stored one (``--conversation``
        with Redis: asked in an earlier command)."""
        if self.last is not None:
            return self.last
        stored = await app.stores.traces.last(conversation)
        return stored if stored is not None and stored.started_at > self.reset_at else None


CHAT_COMMANDS = (
    ("/help", "this list"),
    ("/reset", "forget this conversation's history"),
    ("/history", "the conversation so far"),
    ("/trace", "the last question's full trace"),
    ("/export FILE", "save the last trace as FILE.json or FILE.md"),
    ("/attach PATH", "read a file into this conversation; lookup searches it"),
    ("/quit", "leave (Ctrl-D and Ctrl-C at the prompt too)"),
)


async def _chat_command(
    app: TerminalApp, text: str, conversation: str, console: Console, session: _ChatSession
) -> bool:
    command, _, rest = text.partition(" ")
    match command:
        case "/quit" | "/exit":
            return True
        case "/help":
            width = max(len(name) for name, _ in CHAT_COMMANDS)
            for name, what in CHAT_COMMANDS:
                console.print(f"  {name:<{width}}  {what}", markup=False)
        case "/reset":
            await app.stores.history.clear(conversation)
            try:
                await app.stores.files.clear(conversation)
                files_kept = False
            except StoreUnavailable:
                files_kept = True
            if files_kept or (app.health is not None and app.health.degraded):
                console.print(
                    "Memory is unavailable right now: nothing was cleared.", style="yellow"
                )
            else:
                session.last, session.reset_at = None, time.time()
                console.print("History cleared for this conversation.", style="dim")
        case "/history":
            messages = await app.stores.history.load(conversation)
            if not messages:
                console.print("(no history)", style="dim")
            for message in messages:
                content = message["content"]
                if message["role"] == "user":
                    content = content.removeprefix(QUESTION_PREFIX)
                console.print(printable(f"{message['role']}: {content}"), markup=False)
        case "/trace":
            last = await session.last_trace(app, conversation)
            if last is None:
                console.print(words.NO_TRACE, style="dim")
            else:
                from rich.markdown import Markdown  # markdown-it, pygments: only for /trace

                shown = Markdown(printable(last.to_markdown()), hyperlinks=False)
                if console.is_terminal:
                    console.print(shown, soft_wrap=False)
                else:  # piped: rendered the same, without the padding to the console's width
                    with console.capture() as captured:
                        console.print(shown, soft_wrap=False)
                    lines = (line.rstrip() for line in captured.get().splitlines())
                    console.print("\n".join(lines), markup=False, highlight=False)
        case "/attach":
            if not rest.strip():
                console.print(
                    "Usage: /attach PATH (a text, Markdown, PDF, HTML, CSV or code file)",
                    style="dim",
                )
            else:
                await attach(app, conversation, [Path(rest.strip())], console)
        case "/export":
            last = await session.last_trace(app, conversation)
            if last is None or not rest.strip():
                console.print("Usage: /export FILE.json|FILE.md (after a question)", style="dim")
            else:
                try:
                    path = app.export(last, Path(rest.strip()))
                    console.print(f"Trace written to {path}", style="dim")
                except (OSError, ValueError) as exc:
                    console.print(f"Could not export: {exc}", style="yellow", markup=False)
        case _:
            console.print(f"Unknown command {command}. {CHAT_HELP}", style="yellow", markup=False)
    return False


def _user() -> str:
    with contextlib.suppress(Exception):
        return os.getlogin()
    return os.environ.get("USER", "you")
