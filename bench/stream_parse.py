"""How long StreamParser takes per KB when fed one character at a time.

Run: ``.venv/bin/python bench/stream_parse.py``. The cost per KB should stay flat from 1 KB to
1 MB; a parser that re-scans its buffer on every chunk shows up as a per-KB cost that grows
with the size.
"""

from __future__ import annotations

import time

from core.parser import StreamParser

SIZES_KB = (1, 10, 100, 1000)
_LINE = "I should check the population of 北京 [2024] before answering, then compare.\n"


def transcript(size: int) -> str:
    """A reply of ``size`` characters: half a long thought, half a multi-line finish answer."""
    half = size // 2
    thought = "Thought: " + (_LINE * (half // len(_LINE) + 1))[:half]
    answer = (_LINE * (half // len(_LINE) + 1))[:half]
    return f"{thought}\nAction: finish[{answer}]"


def seconds_to_stream(text: str) -> float:
    parser = StreamParser()
    start = time.perf_counter()
    for char in text:
        parser.feed(char)
    parser.close()
    elapsed = time.perf_counter() - start
    parser.result()  # raises if the transcript stopped parsing: the figure would be meaningless
    return elapsed


def main() -> None:
    print(f"{'size':>8}  {'seconds':>9}  {'µs per KB':>10}")
    for kb in SIZES_KB:
        seconds = seconds_to_stream(transcript(kb * 1024))
        print(f"{kb:>6} KB  {seconds:>9.4f}  {seconds / kb * 1e6:>10.0f}")


if __name__ == "__main__":
    main()
