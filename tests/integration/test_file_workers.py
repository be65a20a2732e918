"""core.file_workers: files are read in real worker processes, within CPU and memory limits,
killed when their reading is cancelled, and never in the threads other work needs."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.file_workers import FileReaders, _frame, _read_frame, _Worker
from core.files import FileLimits, FileRefused, Incoming, InMemoryFileStore, ingest
from tests.hostile import pdf_bomb
from tests.properties import property_settings
from tests.unit.test_files import make_pdf

pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc (Linux)")


def attached(name: str, data: bytes) -> Incoming:
    async def fetch() -> bytes:
        return data

    return Incoming(name, len(data), None, f"u/{name}", fetch)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Watched(FileReaders):
    """The real pool, saying when it has started a worker for a read."""

    def __init__(self, **limits: Any) -> None:
        super().__init__(**limits)
        self.worker_started = asyncio.Event()

    async def _start(self) -> _Worker | None:
        worker = await super()._start()
        self.worker_started.set()
        return worker


async def busy_worker(readers: Watched) -> int:
    """The pid of the worker a read has just been handed to."""
    async with asyncio.timeout(10):
        await readers.worker_started.wait()
    (pid,) = readers.pids
    return pid


@pytest.fixture
async def tight() -> AsyncIterator[Watched]:
    pool = Watched(max_parallel=2, parse_seconds=1, parse_memory_mb=512)
    yield pool
    await pool.aclose()


async def test_the_pdf_bomb_is_skipped_within_its_limit_while_others_go_on(
    tight: Watched,
) -> None:
    # One thread in the default executor: were the bomb read in it (asyncio.to_thread), the
    # other conversation's tool below would wait for the bomb to finish.
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(executor)
    limits = FileLimits()
    bomb_store = InMemoryFileStore()
    bomb = asyncio.create_task(
        ingest(
            "c-bomb",
            [attached("report.pdf", pdf_bomb(pages=10)), attached("notes.txt", b"kept")],
            store=bomb_store,
            limits=limits,
            reader=tight,
        )
    )
    await busy_worker(tight)

    other = await ingest(
        "c-other",
        [attached("terms.pdf", make_pdf(["The warranty lasts 36 months."]))],
        store=InMemoryFileStore(),
        limits=limits,
        reader=tight,
    )
    tool_result = await asyncio.to_thread(sum, [6, 7])
    assert other.indexed == ["terms.pdf"] and tool_result == 13
    assert not bomb.done(), "the other conversation did not wait for the bomb"

    # Ten pages read whole take ~20 s of CPU; the limit ends it after one or two.
    async with asyncio.timeout(20):
        intake = await bomb
    assert intake.refused == ["⚠️ report.pdf: took too long to read, skipped."]
    assert intake.indexed == ["notes.txt"], "the question's other file is still read"
    # The kernel's CPU limit (whole seconds, rounded up) or the wall deadline of the same
    # parse_seconds (+0.5 s): whichever comes first on this machine's load ends it.
    assert tight.outcomes in ({"cpu": 1}, {"stalled": 1}), tight.outcomes
    assert [p.file for p in await bomb_store.load("c-bomb")] == ["notes.txt"]
    executor.shutdown(wait=False)


async def test_cancelling_the_read_kills_the_worker_at_once() -> None:
    readers = Watched(max_parallel=1, parse_seconds=60, parse_memory_mb=512)
    try:
        reading = asyncio.create_task(
            readers.read("report.pdf", pdf_bomb(pages=50), max_chars=500_000)
        )
        pid = await busy_worker(readers)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert not alive(pid), "the worker was killed and reaped, not left reading"
        assert readers.pids == [] and readers.outcomes == {"cancelled": 1}
        # The pool's one slot is free again, with a fresh worker.
        assert await readers.read("a.txt", b"after", max_chars=100) == [(None, "after")]
        assert readers.started == 2
    finally:
        await readers.aclose()


async def test_closing_the_pool_ends_a_busy_worker() -> None:
    """SIGTERM: the app closes the pool, and a file being read stops being read."""
    readers = Watched(max_parallel=1, parse_seconds=60, parse_memory_mb=512)
    reading = asyncio.create_task(readers.read("report.pdf", pdf_bomb(pages=50), max_chars=10))
    pid = await busy_worker(readers)
    await readers.aclose()
    assert not alive(pid)
    with pytest.raises(FileRefused, match="shutting down"):
        await reading
    with pytest.raises(FileRefused, match="shutting down"):
        await readers.read("a.txt", b"late", max_chars=100)


async def test_a_memory_bomb_hits_the_memory_limit() -> None:
    # The bomb's one page needs ~150 MB; CPU is no limit here, memory is.
    readers = FileReaders(max_parallel=1, parse_seconds=60, parse_memory_mb=100)
    try:
        with pytest.raises(FileRefused) as refused:
            await readers.read("report.pdf", pdf_bomb(pages=1), max_chars=500_000)
        assert str(refused.value) == "report.pdf: needs more than 100 MB to read, skipped."
        assert readers.outcomes == {"memory": 1}, "a worker out of memory is replaced"
        assert await readers.read("a.txt", b"fine", max_chars=100) == [(None, "fine")]
    finally:
        await readers.aclose()


async def test_a_worker_gets_no_secrets(
    readers: FileReaders, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-a-worker")
    monkeypatch.setenv("DISCORD_TOKEN", "never-in-a-worker")
    assert await readers.read("a.txt", b"x", max_chars=10) == [(None, "x")]
    (pid,) = readers.pids
    environ = await asyncio.to_thread(Path(f"/proc/{pid}/environ").read_bytes)
    assert b"never-in-a-worker" not in environ
    assert b"PYTHONPATH=" in environ


async def test_a_worker_serves_many_files_and_refusals_keep_it(readers: FileReaders) -> None:
    with pytest.raises(FileRefused, match="not UTF-8"):
        await readers.read("a.txt", b"\xff\xfe\xfa" + b"\x80" * 10, max_chars=100)
    with pytest.raises(FileRefused, match="could not be read"):
        await readers.read("broken.pdf", b"%PDF-1.4 not really", max_chars=100)
    pages = await readers.read("b.pdf", make_pdf(["one", "two"]), max_chars=100)
    assert pages == [(1, "one"), (2, "two")]
    assert readers.started == 1 and not readers.outcomes


@given(st.lists(st.binary(max_size=300), max_size=5), st.integers(min_value=0, max_value=3))
@property_settings(300)
def test_frames_round_trip_and_a_cut_frame_is_no_frame(payloads: list[bytes], cut: int) -> None:
    stream = b"".join(_frame(p) for p in payloads)
    source = io.BytesIO(stream)
    assert [_read_frame(source) for _ in payloads] == payloads
    assert _read_frame(source) is None
    if payloads and cut:
        truncated = io.BytesIO(stream[: max(0, len(stream) - cut)])
        frames = [_read_frame(truncated) for _ in payloads]
        assert frames[-1] is None, "a frame cut short is never taken for a whole one"
