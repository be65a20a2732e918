"""``reactbot eval`` measures retrieval (issue 42, item 6): cases attach ``files`` and expect
the ``source`` the lookup cites; the table adds recall@3 and MRR. On the committed question
set (evals/retrieval.jsonl, seven PyPI READMEs), BM25 finds the literal half and the hybrid
(through the local embeddings fake) does better than BM25 on the paraphrased half."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bench.retrieval_eval import KEY, measure, tagged
from bot.cli import run_cli
from tests.fakes.embeddings_server import FakeEmbeddings


async def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(list(args), env={}, stdout=out)
    return code, out.getvalue()


def _cases(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "garden.md").write_text(
        "# Roses\n\nPrune the roses in late winter.\n\n# Tomatoes\n\nWater tomatoes daily.\n",
        encoding="utf-8",
    )
    (docs / "kitchen.md").write_text("# Bread\n\nKnead the dough ten minutes.\n")
    files = ["docs/garden.md", "docs/kitchen.md"]
    lines = [
        {"id": "roses", "question": "when to prune roses", "files": files,
         "expect": {"source": "garden.md › Roses"}},
        {"id": "dough", "question": "knead dough", "files": files,
         "expect": {"source": "kitchen.md"}},
        {"id": "miss", "question": "how long to knead", "files": files,
         "expect": {"source": "garden.md"}},
        {"id": "calc", "question": "What is 6*7?", "expect": {"number": 42}},
    ]  # fmt: skip
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


async def test_cases_with_files_and_sources_add_recall_and_mrr(tmp_path: Path) -> None:
    code, out = await cli("eval", str(_cases(tmp_path)), "--out", str(tmp_path / "out"))
    assert code == 0, out
    head = out.splitlines()[0].split()
    assert head[head.index("errors") + 1 : head.index("errors") + 3] == ["recall@3", "MRR"]
    assert "75.0% 0 / 0 0.67 0.67" in " ".join(out.split())  # 2 of 3 cited, both first
    assert '"miss"' in out and "want a lookup citing 'garden.md'" in out
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["combinations"][0]["recall_at_3"] == round(2 / 3, 6)
    ranks = {r["case"]: r.get("source_rank", "-") for r in data["runs"]}
    assert ranks == {"roses": 1, "dough": 1, "miss": None, "calc": "-"}


async def test_a_missing_file_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        json.dumps({"question": "q", "files": ["nope.md"], "expect": {"source": "nope.md"}})
    )
    code, _ = await cli("eval", str(path))
    assert code == 2
    assert "line 1: files: 'nope.md' is not a file" in capsys.readouterr().err


async def test_the_question_set_bm25_finds_the_literal_half_and_hybrid_helps_paraphrases(
    tmp_path: Path,
) -> None:
    files = tagged(tmp_path)
    assert len(files["literal"].read_text().splitlines()) >= 30
    assert len(files["paraphrase"].read_text().splitlines()) >= 30
    literal = await measure(files["literal"], {})
    assert literal["recall@3"] >= 0.85
    plain = await measure(files["paraphrase"], {})
    async with FakeEmbeddings(api_key=KEY) as fake:
        hybrid = await measure(
            files["paraphrase"],
            {
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__MODEL": "fake-embed",
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__BASE_URL": fake.base_url,
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__API_KEY_ENV": "EMBED_KEY",
                "EMBED_KEY": KEY,
            },
        )
    assert hybrid["recall@3"] > plain["recall@3"] and hybrid["MRR"] > plain["MRR"]
