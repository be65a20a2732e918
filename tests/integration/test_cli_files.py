"""Local files in the terminal (issue 42 item 4): ``reactbot ask --file PATH`` (repeatable)
and ``/attach PATH`` in ``chat`` go through the platforms' intake: its limits, its worker
processes and its refusal lines; the demo model then finds the answer in the file."""

from __future__ import annotations

import io
from pathlib import Path

from bot.cli import run_cli
from tests.hostile import pdf_bomb

NOTE = "The launch code for project Bluebird is AMBER-7734.\n"
QUESTION = "What is the launch code for project Bluebird?"


async def test_ask_with_a_file_answers_from_it_with_the_demo_model(tmp_path: Path) -> None:
    note = tmp_path / "notes.txt"
    note.write_text(NOTE)
    out = io.StringIO()
    argv = ["ask", "--file", str(note), QUESTION, "--file", str(tmp_path / "gone.md")]
    assert await run_cli(argv, env={}, stdout=out) == 0
    text = out.getvalue()
    assert "📎 Read notes.txt" in text
    assert "⚠️ gone.md: cannot be read (No such file or directory)." in text
    assert "Action: lookup[What is the launch code for project Bluebird]" in text
    answer = text.split("Answer: ", 1)[1]
    assert (
        answer.startswith("Here is the best match in the attached files") and "AMBER-7734" in answer
    )
    assert "Sources: notes.txt" in text


async def test_ask_files_keep_to_the_files_limits_and_workers(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("files: {max_bytes: 100000, max_per_question: 3, parse_seconds: 1}\n")
    (tmp_path / "big.txt").write_text("x" * 100_001)
    (tmp_path / "bomb.pdf").write_bytes(pdf_bomb(pages=10))  # ~20 s of CPU, unbounded
    (tmp_path / "tool.exe").write_bytes(b"MZ")
    (tmp_path / "notes.txt").write_text(NOTE)
    (tmp_path / "more.txt").write_text("more")
    names = ["big.txt", "bomb.pdf", "tool.exe", "notes.txt", "more.txt"]
    argv = ["ask", "--config", str(config), QUESTION]
    for name in names:
        argv += ["--file", str(tmp_path / name)]
    out = io.StringIO()
    assert await run_cli(argv, env={}, stdout=out) == 0
    lines = [" ".join(line.split()) for line in out.getvalue().splitlines()]
    for line in (
        "⚠️ notes.txt: not read, at most 3 files per question.",
        "⚠️ more.txt: not read, at most 3 files per question.",
        "⚠️ big.txt: larger than 100,000 bytes.",
        "⚠️ bomb.pdf: took too long to read, skipped.",  # the worker was ended at 1 s
        "⚠️ tool.exe: this kind of file is not accepted here.",
    ):
        assert line in lines, lines[:12]


async def test_chat_attach_reads_a_file_for_the_next_questions(tmp_path: Path) -> None:
    note = tmp_path / "notes.txt"
    note.write_text(NOTE)
    script = f"/attach {note}\n{QUESTION}\n/attach\n/help\n"
    out = io.StringIO()
    assert await run_cli(["chat"], env={}, stdin=io.StringIO(script), stdout=out) == 0
    text = out.getvalue()
    assert "📎 Read notes.txt: lookup searches it from now on." in text
    assert "AMBER-7734" in text.split("Answer: ", 1)[1]
    assert "Usage: /attach PATH" in text and "/attach PATH" in text.split("/help", 1)[-1]


async def test_files_switched_off_are_said_so(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("files: {enabled: false}\n")
    note = tmp_path / "notes.txt"
    note.write_text(NOTE)
    out = io.StringIO()
    argv = ["ask", "--config", str(config), "--file", str(note), QUESTION]
    assert await run_cli(argv, env={}, stdout=out) == 0
    assert "Attached files are switched off here (files.enabled: false)." in out.getvalue()
    assert "AMBER-7734" not in out.getvalue().split("Answer: ", 1)[1]
