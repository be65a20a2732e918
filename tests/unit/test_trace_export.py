"""``/export FILE`` and ``reactbot trace export``: a name the bot cannot write says so whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.trace_commands import export_trace
from core.trace import Trace


def test_export_to_an_unknown_kind_names_the_whole_path_and_the_kinds(tmp_path: Path) -> None:
    target = tmp_path / "nb_trace.txt"
    with pytest.raises(ValueError) as refused:
        export_trace(Trace(question="q"), target)
    assert str(target) in str(refused.value) and ".json" in str(refused.value)
    assert ".md" in str(refused.value) and not target.exists()


def test_json_and_markdown_are_written(tmp_path: Path) -> None:
    trace = Trace(question="q", answer="a")
    assert Trace.from_json(export_trace(trace, tmp_path / "t.json").read_text()) == trace
    assert "**Answer" in export_trace(trace, tmp_path / "t.MD").read_text()
