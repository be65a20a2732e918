"""The PDF bomb of issue 26, read the old way (in a thread of this process) and through the
file workers (``files.*`` defaults: 2 at once, 10 s of CPU, 512 MB), with another
conversation's work measured meanwhile.

Run: ``PYTHONPATH=. .venv/bin/python bench/files_bomb.py [--pages 5 30] [--skip-before]``

Prints, per bomb size: CPU seconds and peak RSS of reading it in-process (a child process
running ``core.files.extract``, so its RSS is its own), then the wall time until the worker
pool refused it (or read it), and how long a small text file and an ``asyncio.to_thread`` call
from another conversation took while the bomb was being read.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from core.file_workers import FileReaders
from core.files import FileRefused
from tests.hostile import pdf_bomb

BEFORE = """
import resource, sys, time
from core.files import extract
data = sys.stdin.buffer.read()
started = time.process_time()
pages = extract("report.pdf", data)
cpu = time.process_time() - started
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{cpu:.1f} s CPU, peak RSS {rss:.0f} MB, {len(pages)} pages read")
"""


def before(data: bytes) -> str:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE], input=data, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


async def after(data: bytes) -> str:
    readers = FileReaders()
    try:
        started = time.perf_counter()
        bomb = asyncio.create_task(readers.read("report.pdf", data, max_chars=500_000))
        await asyncio.sleep(0.5)  # the bomb's worker is busy by now
        other = time.perf_counter()
        await readers.read("notes.txt", b"the other conversation's file", max_chars=1000)
        other_file = time.perf_counter() - other
        other = time.perf_counter()
        await asyncio.to_thread(sum, [1, 2])
        other_thread = time.perf_counter() - other
        try:
            await bomb
            outcome = "read whole"
        except FileRefused as refused:
            outcome = f"refused: {refused}"
        wall = time.perf_counter() - started
    finally:
        await readers.aclose()
    return (
        f"{outcome} after {wall:.1f} s wall ({dict(readers.outcomes)}); meanwhile another "
        f"file read in {other_file * 1000:.0f} ms (a fresh worker), to_thread in "
        f"{other_thread * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, nargs="+", default=[5, 30])
    parser.add_argument("--skip-before", action="store_true", help="the old way takes minutes")
    args = parser.parse_args()
    for pages in args.pages:
        data = pdf_bomb(pages=pages)
        print(f"PDF bomb, {pages} pages, {len(data):,} bytes")
        if not args.skip_before:
            print(f"  before (in a thread): {before(data)}")
        print(f"  after (file workers, defaults): {asyncio.run(after(data))}")


if __name__ == "__main__":
    main()
