"""How long a question waits for its attached files to be read: extraction, splitting and
indexing, and one lookup over them. No target in the issue; these are the figures to watch.

Run: ``PYTHONPATH=. .venv/bin/python bench/files_ingest.py``

- a 200-page PDF (one paragraph of about 1,500 characters per page, written with pypdf);
- a 4.6 MB Markdown file (headings and paragraphs), cut to ``files.max_chars_per_conversation``
  (500,000 characters) as the store would keep it;
- a 20,000-row CSV;
then a lookup for each (building the BM25 index over every passage, as each run does,
plus one asyncio.run).
Each is timed 5 times with ``time.perf_counter``; the median is printed.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

from core.files import extract, passages_of
from core.knowledge import LookupTool
from core.tools.lookup import Passage
from tests.unit.test_files import make_pdf

WORDS = ("warranty", "delivery", "invoice", "payment", "terms", "months", "support", "renewal")


def paragraph(seed: int, chars: int) -> str:
    words = [WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(chars // 8)]
    return " ".join(words)[:chars]


def median_ms(work: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    pdf = make_pdf([paragraph(page, 1500) for page in range(200)])
    markdown = "\n\n".join(
        f"## Section {i}\n\n{paragraph(i, 900)}\n\n{paragraph(i + 1, 900)}" for i in range(2600)
    ).encode()
    rows = "\n".join(f"{i},{WORDS[i % len(WORDS)]},{i * 3}" for i in range(20_000))
    csv = ("id,term,amount\n" + rows).encode()
    print(f"{'file':<28} {'bytes':>10} {'passages':>9} {'read+split ms':>14} {'lookup ms':>10}")
    for name, data in (("report.pdf (200 pages)", pdf), ("notes.md", markdown), ("t.csv", csv)):
        file = name.split()[0]

        def read(file: str = file, data: bytes = data) -> list[Passage]:
            return passages_of(file, extract(file, data, max_chars=500_000))

        passages = passages_of(file, extract(file, data, max_chars=500_000))
        read_ms = median_ms(read)

        def look(passages: tuple[Passage, ...] = tuple(passages)) -> None:
            lookup = LookupTool().with_files(passages)
            asyncio.run(lookup.run("warranty renewal notice months"))

        print(
            f"{name:<28} {len(data):>10,} {len(passages):>9,} {read_ms:>14.1f} {median_ms(look):>10.1f}"
        )


if __name__ == "__main__":
    main()
