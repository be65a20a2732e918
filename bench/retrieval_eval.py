"""``reactbot eval evals/retrieval.jsonl`` twice: BM25 alone, then hybrid (BM25 fused with
dense vectors from the local embeddings fake, tests/fakes/embeddings_server.py, through the
real ``openai`` client over real HTTP); recall@3 and MRR for the whole set and for each tag
(``literal``: the question shares words with its passage; ``paraphrase``: it shares none).

    .venv/bin/python bench/retrieval_eval.py

The fake's vectors are a hashed bag of words with a synonym table written with this question
set in view: the hybrid figures show that the wiring works (vectors made, cached, fused),
not how a real embedding model would do. No real model is reachable from this machine.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bot.cli import run_cli  # noqa: E402
from tests.fakes.embeddings_server import FakeEmbeddings  # noqa: E402

CASES = REPO / "evals" / "retrieval.jsonl"
KEY = "sk-embed-bench"


def tagged(folder: Path) -> dict[str, Path]:
    """The case file, and one per tag, with absolute file paths (they live elsewhere)."""
    files: dict[str, list[str]] = {"all": []}
    for line in CASES.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        case = json.loads(line)
        case["files"] = [str((CASES.parent / name).resolve()) for name in case["files"]]
        text = json.dumps(case, ensure_ascii=False)
        files["all"].append(text)
        for tag in case.get("tags", ()):
            files.setdefault(tag, []).append(text)
    out = {}
    for tag, lines in files.items():
        out[tag] = folder / f"{tag}.jsonl"
        out[tag].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


async def measure(case_file: Path, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        argv = ["eval", str(case_file), "--concurrency", "1", "--out", out]
        await run_cli(argv, env=env, stdout=io.StringIO())
        summary = json.loads((Path(out) / "results.json").read_text())["combinations"][0]
    return {"runs": summary["runs"], "recall@3": summary["recall_at_3"], "MRR": summary["mrr"]}


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        files = tagged(Path(folder))
        async with FakeEmbeddings(api_key=KEY) as fake:
            hybrid = {
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__MODEL": "fake-embed",
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__BASE_URL": fake.base_url,
                "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__API_KEY_ENV": "BENCH_EMBED_KEY",
                "BENCH_EMBED_KEY": KEY,
            }
            print(
                f"{'cases':<11} {'runs':>4}  {'BM25 recall@3':>13} {'MRR':>5}  "
                f"{'hybrid recall@3':>15} {'MRR':>5}"
            )
            for tag, path in files.items():
                bm25 = await measure(path, {})
                both = await measure(path, hybrid)
                print(
                    f"{tag:<11} {bm25['runs']:>4}  {bm25['recall@3']:>13.2f} {bm25['MRR']:>5.2f}"
                    f"  {both['recall@3']:>15.2f} {both['MRR']:>5.2f}"
                )
            print(f"(texts embedded by the fake: {len(fake.inputs)})")


if __name__ == "__main__":
    asyncio.run(main())
