"""How long Telegram's final answer takes to draw when it holds Markdown tables.

Run: ``.venv/bin/python bench/telegram_tables.py``. An answer of N tables of 50 rows (each
laid out by ``adapters.tables``, then split at 4,096 units and drawn as HTML): the cost per
KB of answer should stay flat as N grows; a layout that re-scanned the text would grow.
"""

from __future__ import annotations

import time

from adapters.live import RunView
from adapters.telegram.render import TelegramRenderer
from core.events import Finished, RunStarted
from core.trace import Trace

TABLES = (1, 10, 100)
REPEATS = 5


def answer(tables: int) -> str:
    rows = "\n".join(f"| item {i} | {i * 7} € | 北京 {i % 9} |" for i in range(50))
    table = f"| Item | Price | City |\n|---|--:|---|\n{rows}"
    return "\n\nSome words about the table.\n\n".join([table] * tables)


def seconds_to_draw(text: str) -> float:
    trace = Trace(question="q", id="bench")
    trace.answer = text
    best = float("inf")
    for _ in range(REPEATS):
        view = RunView(question="q")
        view.apply(RunStarted("bench", "q", "scripted", 8))
        view.apply(Finished(trace, text, "answered"))
        renderer = TelegramRenderer("bench", clock=time.monotonic)
        start = time.perf_counter()
        renderer.final(view)
        renderer.trace_posts(trace, steps=False)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"{'tables':>7}  {'KB':>7}  {'ms':>8}  {'µs per KB':>10}")
    for tables in TABLES:
        text = answer(tables)
        seconds = seconds_to_draw(text)
        kb = len(text.encode()) / 1024
        print(f"{tables:>7}  {kb:>7.1f}  {seconds * 1000:>8.2f}  {seconds * 1e6 / kb:>10.1f}")


if __name__ == "__main__":
    main()
