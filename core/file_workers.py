"""Files are read in worker processes, never in the bot's own threads.

A hostile file (a 2.8 KB PDF can ask for minutes of CPU and hundreds of MB) must not freeze
the bot, fill the default executor other conversations' tools run in, or outlive a Stop: a
thread can be neither limited nor cancelled, a process can be both::

    readers = FileReaders(max_parallel=2, parse_seconds=10, parse_memory_mb=512)
    pages = await readers.read("report.pdf", data, max_chars=500_000)   # or FileRefused
    await readers.aclose()

At most ``max_parallel`` files are read at once, and at most one of each person's (``owner``):
the others wait in a fair queue (``FairSlots``), where a free worker goes to the waiting person
served least recently, so one person's several files, or six people's hostile ones, cannot
keep another's file waiting behind all of them; ``on_queue`` hears when a file has waited
``notice_after`` seconds (its live message says so) and when it is then read. Each worker
is ``python -m core.file_workers`` with its address space limited (``RLIMIT_AS``) and, for
each file, its CPU time (``RLIMIT_CPU``: the kernel ends it at the limit, even inside C code);
a wall-clock deadline of the same ``parse_seconds`` (plus half a second; counted from when the
worker, started and ready, is handed the file) covers a worker that stalls, and one the machine's load keeps from its CPU: a person waits no longer than that for
a file, however busy the machine. A worker
past a limit, or whose reading is cancelled (Stop, shutdown, a cancelled task), is killed at
once and a fresh one started for the next file. Workers get no secrets (a bare environment)
and die with the bot (``PR_SET_PDEATHSIG`` on Linux; end of input elsewhere).

The pipe carries frames: a 4-byte big-endian length, then the bytes. A new worker first says
``{"ready": true}``; a job is then a JSON header frame and the file's bytes; the reply one
JSON frame: ``{"pages": [[n, text], ...]}``, ``{"refused": line}`` or ``{"memory": true}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import struct
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from core.fair import FairSlots, OnQueue
from core.files import FileRefused, Page, extract, safe_name

__all__ = ["FileReaders", "main"]

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
_MEMORY_REPLY = b'{"memory": true}'
_READY = b'{"ready": true}'
"""A new worker's first frame: it has started and imported what reading needs (pypdf), so
a file's deadline counts its reading, not the interpreter's start on a loaded machine."""
_START_SECONDS = 30.0
"""How long a new worker may take to say it is ready (a very loaded machine)."""
# A worker's own start (the interpreter, pypdf) needs this much address space on top of the
# file's; below it no file could be read at all.
_BASE_MEMORY_MB = 64


@dataclass(frozen=True, slots=True)
class _Job:
    name: str
    data: bytes
    max_chars: int


class _Worker:
    """One worker process and its pipes; used by one read at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ask(self, job: _Job, *, cpu_seconds: float) -> dict[str, Any]:
        stdin = self.process.stdin
        assert stdin is not None
        header = {"name": job.name, "max_chars": job.max_chars, "cpu_seconds": cpu_seconds}
        stdin.write(_frame(json.dumps(header).encode()) + _frame(job.data))
        await stdin.drain()
        reply = json.loads(await self.frame())
        if not isinstance(reply, dict):
            raise ValueError("a worker's reply is not an object")
        return reply

    async def frame(self) -> bytes:
        """The worker's next frame on its output."""
        stdout = self.process.stdout
        assert stdout is not None
        (length,) = _LENGTH.unpack(await stdout.readexactly(_LENGTH.size))
        return await stdout.readexactly(length)

    async def kill(self) -> None:
        """Ends the worker now and waits for it, so no process or pipe outlives it."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()

    async def stop(self) -> None:
        """Ends an idle worker: the end of its input is its signal to exit."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            async with asyncio.timeout(2):
                await self.process.wait()
        except TimeoutError:
            await self.kill()


class FileReaders:
    """A bounded pool of worker processes that read files within CPU and memory limits."""

    def __init__(
        self,
        *,
        max_parallel: int = 2,
        parse_seconds: float = 10.0,
        parse_memory_mb: int = 512,
        python: str = sys.executable,
        notice_after: float = 3.0,
    ) -> None:
        if max_parallel < 1 or parse_seconds <= 0 or parse_memory_mb < _BASE_MEMORY_MB:
            raise ValueError("max_parallel >= 1, parse_seconds > 0, parse_memory_mb >= 64")
        self.max_parallel = max_parallel
        self.parse_seconds = parse_seconds
        self.parse_memory_mb = parse_memory_mb
        self._python = python
        self.slots = FairSlots(max_parallel, notice_after=notice_after)
        """Who reads next: one file per person at a time, the least recently served first."""
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._closed = False
        self.started = 0
        """Workers started so far (a killed one is replaced by a new start)."""
        self.outcomes: Counter[str] = Counter()
        """Files whose worker was ended, by why: ``cpu`` (the kernel's CPU limit),
        ``memory``, ``stalled`` (the wall-clock deadline), ``crashed``, ``cancelled``."""

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids (for tests and the operator)."""
        return sorted(worker.pid for worker in self._all)

    async def read(
        self,
        name: str,
        data: bytes,
        *,
        max_chars: int,
        owner: str | None = None,
        on_queue: OnQueue | None = None,
    ) -> list[Page]:
        """The file's pages, read by a worker once ``owner`` (the person who attached it;
        None: nobody else's) has its turn; ``FileRefused`` with one line otherwise."""
        if self._closed:
            raise FileRefused(f"{safe_name(name)}: not read, the bot is shutting down.")
        async with self.slots.hold(owner, on_queue=on_queue):
            worker = self._idle.pop() if self._idle else await self._start()
            job = _Job(name, data, max_chars)
            reply = await self._ask(worker, job) if worker else {"outcome": "crashed"}
        if self._closed and "pages" not in reply:  # its worker was ended by aclose
            raise FileRefused(f"{safe_name(name)}: not read, the bot is shutting down.")
        return _pages(name, reply, memory_mb=self.parse_memory_mb)

    async def _ask(self, worker: _Worker, job: _Job) -> dict[str, Any]:
        # The kernel's CPU limit ends a file that spends its seconds; this deadline one that
        # does not get them: a stalled worker, or a machine so loaded that a CPU second takes
        # several wall seconds (issue 42: 10 s of CPU took 35 s there, and six files 105 s).
        # The half second on top carries the file and the reply; the worker's start is not
        # counted (it said it was ready first).
        deadline = self.parse_seconds + 0.5
        try:
            # asyncio.timeout, not wait_for: before Python 3.12 wait_for swallows a Stop that
            # arrives as the worker replies (CPython gh-86296), and the run would go on.
            async with asyncio.timeout(deadline):
                reply = await worker.ask(job, cpu_seconds=self.parse_seconds)
        except TimeoutError:
            return await self._discard(worker, "stalled")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            # It died: by the CPU limit (its exit code says so) or a crash.
            await self._discard(worker, None, grace=1.0)
            died_of_cpu = worker.process.returncode == -signal.SIGXCPU
            return self._count("cpu" if died_of_cpu else "crashed")
        except BaseException:  # cancelled (Stop, shutdown): the reading ends now
            await asyncio.shield(self._discard(worker, "cancelled"))
            raise
        if reply.get("memory"):  # after a MemoryError its heap is not to be trusted
            return await self._discard(worker, "memory")
        self._idle.append(worker)
        return reply

    def _count(self, outcome: str) -> dict[str, Any]:
        log.info("a file's worker was ended (%s)", outcome)
        self.outcomes[outcome] += 1
        return {"outcome": outcome}

    async def _start(self) -> _Worker | None:
        """A new worker, once it says it is ready; None when it does not (counted crashed)."""
        process = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            "core.file_workers",
            str(self.parse_memory_mb),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=_worker_env(),
        )
        worker = _Worker(process)
        self._all.add(worker)
        self.started += 1
        try:
            async with asyncio.timeout(_START_SECONDS):
                ready = await worker.frame()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            await self._discard(worker, "crashed")
            return None
        except BaseException:  # cancelled (Stop, shutdown) while it starts
            await asyncio.shield(self._discard(worker, "cancelled"))
            raise
        if ready != _READY:
            await self._discard(worker, "crashed")
            return None
        return worker

    async def _discard(
        self, worker: _Worker, outcome: str | None, *, grace: float = 0.0
    ) -> dict[str, Any]:
        """Kills ``worker`` (after ``grace`` seconds to exit by itself, so that its exit
        code is its own) and forgets it; the next read starts a fresh one."""
        self._all.discard(worker)
        if grace:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await asyncio.shield(worker.process.wait())
        await worker.kill()
        return {} if outcome is None else self._count(outcome)

    async def aclose(self) -> None:
        """Ends every worker: idle ones by closing their input, busy ones by killing them
        (their reads fail or are being cancelled anyway). Idempotent."""
        self._closed = True
        idle, self._idle = self._idle, []
        busy = self._all.difference(idle)
        self._all.clear()
        await asyncio.gather(
            *(worker.stop() for worker in idle), *(worker.kill() for worker in busy)
        )


def _pages(name: str, reply: dict[str, Any], *, memory_mb: int) -> list[Page]:
    shown = safe_name(name)
    if "pages" in reply:
        return [(number, text) for number, text in reply["pages"]]
    if "refused" in reply:
        raise FileRefused(str(reply["refused"]))
    outcome = reply.get("outcome")
    if outcome == "memory":
        raise FileRefused(f"{shown}: needs more than {memory_mb} MB to read, skipped.")
    if outcome in ("cpu", "stalled"):
        raise FileRefused(f"{shown}: took too long to read, skipped.")
    raise FileRefused(f"{shown}: could not be read (the reader stopped), skipped.")


def _frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


def _worker_env() -> dict[str, str]:
    """No secrets for a process that reads hostile files: only where to find the code."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {"PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "random"}
    if "PATH" in os.environ:
        env["PATH"] = os.environ["PATH"]
    return env


# --- the worker process ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """A worker: reads jobs from stdin until it closes, one reply each on stdout."""
    args = sys.argv[1:] if argv is None else argv
    _die_with_parent()
    _limit_memory(int(args[0]) * 1024 * 1024)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    with contextlib.suppress(ImportError):
        import pypdf  # noqa: F401  (part of the start, not of the first PDF's deadline)
    sink.write(_frame(_READY))
    sink.flush()
    while (job := _read_job(source)) is not None:
        header, data = job
        _limit_cpu(float(header["cpu_seconds"]))
        reply = _answer(str(header["name"]), data, max_chars=int(header["max_chars"]))
        sink.write(_frame(reply))
        sink.flush()
        if reply == _MEMORY_REPLY:
            return 1
    return 0


def _answer(name: str, data: bytes, *, max_chars: int) -> bytes:
    try:
        pages = extract(name, data, max_chars=max_chars)
        return json.dumps({"pages": pages}).encode()
    except FileRefused as refusal:
        return json.dumps({"refused": str(refusal)}).encode()
    except MemoryError:
        return _MEMORY_REPLY  # made before the heap ran out: no allocation needed to say it


def _read_job(source: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    header = _read_frame(source)
    if header is None:
        return None
    data = _read_frame(source)
    if data is None:
        return None
    return json.loads(header), data


def _read_frame(source: BinaryIO) -> bytes | None:
    prefix = source.read(_LENGTH.size)
    if len(prefix) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(prefix)
    payload = source.read(length)
    return payload if len(payload) == length else None


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _limit_cpu(seconds: float) -> None:
    """This file's CPU time: the kernel sends SIGXCPU (which ends the process) when the
    worker's total CPU time passes what it had used before plus ``seconds``."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _die_with_parent() -> None:
    """On Linux, the kernel kills the worker when the bot dies, even mid-file."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


if __name__ == "__main__":
    raise SystemExit(main())
