"""Approvals in a terminal: the real ``reactbot ask`` in a pseudo-terminal (a person types
y, e or n at the prompt), piped (nobody to ask: denied with a note) and ``--approve``."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from tests.integration.test_cli import CLEAN_ENV, REACTBOT, REPO, reactbot

CONFIG = "agent:\n  approval:\n    tools: [calculate]\n"
PROMPT = "Run calculate[6*7]? [y]es / [e]dit / [n]o / [a]lways › "


class Terminal:
    """``reactbot`` on a pty: what it prints, and keys typed at it."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [*REACTBOT, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**CLEAN_ENV, "TERM": "dumb"},
            cwd=REPO,
            close_fds=True,
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, *, within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"the program ended before {text!r}; saw:\n{self.seen}"
                self.seen += chunk.decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self) -> int:
        code = self.process.wait(timeout=20)
        os.close(self.master)
        return code


def config(tmp_path: Path) -> str:
    path = tmp_path / "approve.yaml"
    path.write_text(CONFIG)
    return str(path)


def test_a_person_approves_at_the_terminal(tmp_path: Path) -> None:
    terminal = Terminal("--config", config(tmp_path), "ask", "What is 6*7?")
    terminal.expect(PROMPT)
    terminal.type("y\r")
    terminal.expect("Answer: 6*7 = 42")
    assert "✅ approved by" in terminal.seen and "Observation: 42" in terminal.seen
    assert terminal.finish() == 0


def test_a_person_edits_the_input_in_place(tmp_path: Path) -> None:
    terminal = Terminal("--config", config(tmp_path), "ask", "What is 6*7?")
    terminal.expect(PROMPT)
    terminal.type("e\r")
    terminal.expect("input › ")
    terminal.type("\x15" + "2*21\r")  # Ctrl-U clears the prefilled 6*7
    terminal.expect("✓ ")
    assert "✏️ edited by" in terminal.seen
    said = " ".join(terminal.seen.split())  # a terminal's lines wrap at its width
    assert "a person edited the input before it ran; it ran as calculate[2*21]" in said
    assert terminal.finish() == 0


def test_a_person_denies_with_a_reason(tmp_path: Path) -> None:
    terminal = Terminal("--config", config(tmp_path), "ask", "What is 6*7?")
    terminal.expect(PROMPT)
    terminal.type("n\r")
    terminal.expect("reason (optional) › ")
    terminal.type("not now\r")
    terminal.expect("✓ ")
    assert "🚫 denied by" in terminal.seen and ': "not now"' in terminal.seen
    assert "Observation: The user denied this action. Their reason: not now" in terminal.seen
    assert terminal.finish() == 0


def test_piped_input_denies_with_a_note_and_the_flag_decides(tmp_path: Path) -> None:
    denied = reactbot("--config", config(tmp_path), "ask", "What is 6*7?")
    assert denied.returncode == 0, denied.stderr
    assert "nobody to ask: input is not a terminal; run with --approve yes to allow" in (
        denied.stdout
    )
    assert "Observation: The user denied this action." in denied.stdout
    approved = reactbot("--config", config(tmp_path), "ask", "--approve", "yes", "What is 6*7?")
    assert "✅ approved by --approve yes" in approved.stdout
    assert "Observation: 42" in approved.stdout
    refused = reactbot("--config", config(tmp_path), "ask", "--approve", "no", "What is 6*7?")
    assert "🚫 denied by --approve no" in refused.stdout
