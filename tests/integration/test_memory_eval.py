"""``reactbot eval evals/memory.jsonl`` with and without memory, against the OpenAI fake
(``bench/memory_eval.py``): a fact told in one conversation is used in another only through
memories, and a forgotten one is not."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from core.evals import CaseError, parse_case

ROOT = Path(__file__).resolve().parents[2]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memory_eval", ROOT / "bench" / "memory_eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("memory", "passed"), [(True, 6), (False, 1)])
async def test_memories_carry_facts_between_conversations(
    tmp_path: Path, memory: bool, passed: int
) -> None:
    code, shown = await bench().one_run(tmp_path, memory=memory, redis=None)
    assert code == 0, shown
    where = tmp_path / ("with-memory" if memory else "without-memory")
    runs = json.loads((where / "results.json").read_text())["runs"]
    assert sum(run["verdict"] == "pass" for run in runs) == passed, shown
    forgotten = next(run for run in runs if run["case"] == "memory/forgotten")
    assert forgotten["verdict"] == "pass", "a forgotten fact is not recalled"


def test_a_case_may_ask_questions_before_its_own() -> None:
    case = parse_case(
        {"question": "q?", "expect": {"contains": "x"}, "before": ["Remember x.", "Forget y."]},
        line=3,
        number=1,
    )
    assert case.before == ("Remember x.", "Forget y.")
    assert parse_case({"question": "q", "expect": {"contains": "x"}}, line=1, number=1).before == ()
    for wrong, said in (("Remember x.", "list"), ([" "], "empty"), ([1], "string")):
        with pytest.raises(CaseError, match=said):
            parse_case(
                {"question": "q", "expect": {"contains": "x"}, "before": wrong}, line=3, number=1
            )
