"""``reactbot chat`` and ``ask`` in a real pseudo-terminal (issue 15, "Terminal chat"): the
pty is the program's controlling terminal, so Ctrl-C typed at it is a real SIGINT."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import termios
import time
from pathlib import Path

from tests.integration.test_cli import CLEAN_ENV, REACTBOT, REPO

CTRL_C, CTRL_D = "\x03", "\x04"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _controlling_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``reactbot`` on a pty of ``columns`` columns: what it prints, and keys typed at it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, columns: int = 80) -> None:
        self.master, slave = pty.openpty()
        termios.tcsetwinsize(slave, (40, columns))
        self.process = subprocess.Popen(
            [*REACTBOT, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**CLEAN_ENV, "TERM": "dumb", **(env or {})},
            cwd=REPO,
            close_fds=True,
            start_new_session=True,
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        self.raw = ""

    @property
    def seen(self) -> str:
        return _ANSI.sub("", self.raw).replace("\r\n", "\n")

    def expect(self, text: str, *, within: float = 20.0, after: int = 0) -> None:
        """Wait until ``text`` shows (after the ``after``-th character of ``seen``)."""
        deadline = time.monotonic() + within
        while text not in self.seen[after:]:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"the program ended before {text!r}; saw:\n{self.seen}"
                self.raw += chunk.decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def command(self, line: str, *, until: str = "› ") -> str:
        """Type ``line`` at the prompt; what it printed up to the next prompt."""
        mark = len(self.seen)
        self.type(line + "\r")
        self.expect("\n" + until, after=mark)
        return self.seen[mark:]

    def finish(self) -> int:
        code = self.process.wait(timeout=20)
        try:
            while chunk := os.read(self.master, 4096):
                self.raw += chunk.decode(errors="replace")
        except OSError:
            pass
        os.close(self.master)
        return code


def test_ctrl_d_and_ctrl_c_at_the_prompt_end_the_line_and_exit_0() -> None:
    for key in (CTRL_D, CTRL_C):
        terminal = Terminal("chat")
        terminal.expect("› ")
        terminal.type(key)
        assert terminal.finish() == 0, terminal.seen  # exit 0: `make run` reports no error
        assert terminal.seen.endswith("› \n") or terminal.seen.endswith("› ^C\n"), terminal.seen
        assert "Traceback" not in terminal.seen and "KeyboardInterrupt" not in terminal.seen


def test_ctrl_c_during_a_run_starts_its_notice_on_a_new_line() -> None:
    terminal = Terminal("chat")
    terminal.expect("› ")
    terminal.type("What is 12*12?\r")
    terminal.expect("Thought: I am")  # the demo streams its thought slowly on a terminal
    terminal.type(CTRL_C)
    terminal.expect("Stopped by you (Ctrl-C)")
    terminal.expect("after step 1.\n› ")  # the chat goes on
    stopped = next(line for line in terminal.seen.splitlines() if "Stopped by you" in line)
    assert stopped.startswith("⏹ Stopped by you (Ctrl-C)"), terminal.seen
    trace = terminal.command("/trace")  # the step the chat showed is the trace's, counted alike
    assert "1 step ·" in trace and "I am" in trace, trace
    assert "/quit" in terminal.command("/help")
    terminal.type(CTRL_D)
    assert terminal.finish() == 0


def test_ctrl_c_while_a_person_is_asked_to_approve_starts_the_notice_on_a_new_line(
    tmp_path: Path,
) -> None:
    config = tmp_path / "approve.yaml"
    config.write_text("agent:\n  approval:\n    tools: [calculate]\n")
    terminal = Terminal("--config", str(config), "ask", "What is 6*7?")
    terminal.expect("[a]lways › ")
    terminal.type(CTRL_C)
    terminal.expect("Stopped by you (Ctrl-C)")
    stopped = next(line for line in terminal.seen.splitlines() if "Stopped by you" in line)
    assert stopped.startswith("⏹ Stopped"), terminal.seen
    assert terminal.finish() == 1  # not answered


def test_help_history_trace_and_reset_in_the_chat() -> None:
    terminal = Terminal("chat", columns=100)
    terminal.expect("› ")
    assert "No trace yet" in terminal.command("/trace")
    listed = terminal.command("/help")
    for command in ("/help", "/reset", "/history", "/trace", "/export FILE", "/quit"):
        assert f"  {command} " in listed
    assert "✓ 2 steps" in terminal.command("What is 2+2?")
    history = terminal.command("/history")
    assert "user: What is 2+2?" in history and "assistant: 2+2 = 4" in history
    assert "Question:" not in history
    trace = terminal.command("/trace")
    assert "calculate[2+2]" in trace and "2+2 = 4" in trace
    assert "**" not in trace and "# Trace" not in trace  # rendered by rich, not raw Markdown
    assert "History cleared" in terminal.command("/reset")
    assert "No trace yet" in terminal.command("/trace")
    terminal.type("/quit\r")
    assert terminal.finish() == 0


def test_trace_in_a_chat_finds_the_conversations_stored_traces(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    config = tmp_path / "redis.yaml"
    config.write_text(f'redis:\n  prefix: "{redis_prefix}"\n')
    env = {"REDIS_URL": redis_url}
    asked = subprocess.run(
        [*REACTBOT, "--config", str(config), "ask", "--conversation", "team", "What is 7*6?"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**CLEAN_ENV, **env},
        cwd=REPO,
    )
    assert asked.returncode == 0, asked.stderr
    terminal = Terminal("--config", str(config), "chat", "--conversation", "team", env=env)
    terminal.expect("› ")
    assert "calculate[7*6]" in terminal.command("/trace")
    terminal.type("/quit\r")
    assert terminal.finish() == 0
    other = Terminal("--config", str(config), "chat", "--conversation", "other", env=env)
    other.expect("› ")
    assert "No trace yet" in other.command("/trace")
    other.type(CTRL_D)
    assert other.finish() == 0


def test_live_output_wraps_at_word_boundaries() -> None:
    # rich takes a "dumb" terminal to be 80 columns: this one says what it is.
    terminal = Terminal("ask", "What is 17*23+4?", columns=40, env={"TERM": "xterm"})
    assert terminal.finish() == 0
    lines = terminal.seen.splitlines()
    thought = lines[lines.index(next(x for x in lines if x.startswith("Thought: I am"))) :]
    assert all(len(line) <= 40 for line in lines), lines
    phrase = "I am the offline demo model (no language model is configured), following"
    assert phrase in " ".join(line.strip() for line in thought[:4])  # no word cut in two
    assert all(not line.endswith(" ") for line in thought[:3])
