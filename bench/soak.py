"""Soak: N conversations at once for T minutes through the Discord or Slack fake, with Redis.

    scripts/with-redis .venv/bin/python -m bench.soak [--platform discord|slack|all]
        [--conversations 1000] [--minutes 2] [--reply demo|realistic] [--chunk-interval 0.02]
        [--max-runs N]

``--reply realistic`` answers through the real ``openai`` client from ``bench/realistic_model.py``
(its own process): three tool steps of 200-400-character thoughts, then a 600-1,000-character
answer, all in 3-6-character chunks ``--chunk-interval`` seconds apart. ``demo`` (the default)
is the offline demo model's few dozen chunks.

The bot runs in this process exactly as ``reactbot serve`` wires it (``App.create``, Redis
stores, ``settle_heap``, ``serve_discord`` / ``serve_slack``, the offline demo model
streaming its steps: a calculate step, then the answer). The platform's fake runs in a child
process together with the driver that plays the users, so neither its work nor its growing
call log counts against the bot's event loop or memory. Each conversation has its own channel and user, and asks its
next question as soon as the previous answer is final on the platform, until T is up; then
every run still going gets up to a minute to end.

Printed per platform:
- first visible update: the question sent -> the first edit of the bot's reply that the
  platform took (p50, p99);
- event-loop lag: how late a 50 ms sleep woke in the bot's process (p50, p99, max), from 5 s
  after start (the login and first connections are not the conversations' load);
- the bot process's own CPU once warm (the last two thirds of T): milliseconds of CPU per
  conversation-second and the share of one core (``bench/relay_floor.py`` prints the same
  figure for a bare relay of the same streams: the floor);
- RSS growth per 1,000 runs once warm: RSS after the first third of T and at the end of T
  (each after a full collection), divided by the runs that ended between;
- final states lost: runs whose message, on the platform, never reached a final state (the
  answer, without a Stop button). Must be 0;
- failed runs apart from refusals: answered without memory (the message says "memory
  unavailable": a Redis call failed), failed or stopped, or never final. A question the bot
  told it was busy ("ask again in a moment": ``agent.max_concurrent_runs`` or
  ``ops.max_loop_lag``) is a refusal, counted apart, and no failure. Must be 0;
- the machine's load average before and after, and the 429s the platform answered.

``SOAK_PROFILE=path`` writes where the bot's thread spent its time (sampled every 5 ms);
``SOAK_STUCK_AFTER=seconds`` writes each run that has gone on longer, with its task's stack;
``SOAK_TRACEMALLOC=path`` writes what the heap gained in the second half of the warm run, by
the line and the stack that allocated it (to tell a leak from a cache filling);
``SOAK_OBJECTS=path`` writes RSS every 10 s and, from warm to end, what grew outside the
heap's lines too: live objects by type (``gc.get_objects``), Python's allocated blocks and
arenas (``sys._debugmallocstats``), the C allocator's arenas (``mallinfo2``) with
``MALLOC_ARENA_MAX`` as set, the containers of 100 or more that grew (and the attribute that
holds each), collections per generation, and the garbage the full collection at the end
found, by type (issue 46: ended runs' cycles waiting in the oldest generation);
``SOAK_COLLECT_EVERY=seconds`` makes a full collection that often (a diagnosis: growth that
goes with it was garbage, not something kept); ``SOAK_TRACEMALLOC_FRAMES`` (default 12)
sets the stack depth ``SOAK_TRACEMALLOC`` records (1 is much cheaper).

Capacity (issue 25 item 3): the largest ``--conversations`` with ``--reply realistic`` whose
lag p99 is under 100 ms with 0 failed runs; docs/operations.md ("Sizing") has the figures.

Targets (issue 14): 1,000 concurrent conversations with loop lag p99 under 100 ms, RSS growth
under 5 MB per 1,000 runs once warm, 0 final states lost.

Slack runs with no workspace ``chat.update`` budget (``slack_load`` measures the bot within
it; at 1,000 conversations the budget, not the process, would set the pace).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.parse
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

QUESTION = "What is 17*23+4?"
ANSWER = "395"
DEMO_DELAY = 0.02
"""Seconds between the demo model's chunks (a few dozen chunks per run)."""
LAG_INTERVAL = 0.05
LAG_AFTER = 5.0
"""Seconds of start-up (the gateway's login, the first connections) the lag is not sampled."""
DRAIN_SECONDS = 60.0
SLACK_SECRET = "soak-signing-secret-0123456789"
DISCORD_TOKEN = "soak-token"


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- the bot's side (this process) ----------------------------------------------------------


class _Quiet:
    """Watches nothing inside a run."""

    def model_call(self, step: int, model: str, request: Any) -> _Quiet:
        return _Quiet()

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> _Quiet:
        return _Quiet()

    def response(self, id: str, model: str) -> None:
        pass

    def first_chunk(self) -> None:
        pass

    def chunk(self, usage: Any, finish: str | None) -> None:
        pass

    def end(self, *_: Any) -> None:
        pass


class _RunEnd(_Quiet):
    def __init__(self, counter: RunCounter) -> None:
        self._counter = counter

    def end(self, *_: Any) -> None:
        self._counter.ended += 1


@dataclass
class RunCounter:
    """A run observer that counts the runs ended (a run observer, ``core.observe``)."""

    ended: int = 0

    def start(self, trace: Any) -> _RunEnd:
        return _RunEnd(self)


@dataclass
class BotFigures:
    lags: list[float] = field(default_factory=list)
    rss_warm: int = 0
    rss_end: int = 0
    cpu_warm: float = 0.0
    cpu_end: float = 0.0
    wall_warm: float = 0.0
    wall_end: float = 0.0
    redis_errors: int = 0
    runs_warm: int = 0
    runs_end: int = 0
    gc_pauses: list[float] = field(default_factory=list)
    """Seconds each collection of the oldest generation held the loop (once warm)."""

    def time_collections(self) -> Callable[[], None]:
        """Times full collections (``gc.callbacks``) until the returned function is called:
        a loop held for hundreds of milliseconds by the collector shows as lag, not CPU."""
        started = [0.0]

        def callback(phase: str, info: dict[str, int]) -> None:
            if info.get("generation") != 2:
                return
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                self.gc_pauses.append(time.perf_counter() - started[0])

        gc.callbacks.append(callback)
        return lambda: gc.callbacks.remove(callback)


async def sample_lag(figures: BotFigures) -> None:
    """Until cancelled, once the bot has started (``LAG_AFTER``): how late a 50 ms sleep woke."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(LAG_AFTER)
    while True:
        started = loop.time()
        await asyncio.sleep(LAG_INTERVAL)
        figures.lags.append(max(0.0, loop.time() - started - LAG_INTERVAL))


async def report_stuck(after: float) -> None:
    """``SOAK_STUCK_AFTER=seconds``: every 5 s, each run older than that which has not ended,
    or whose consumer has not taken its events, written to stderr once, with its task's stack
    and its outbox (what is pending, the consumer's waiter, the text wake's timer): for the
    runs a soak finds never final (issue 25)."""
    import io

    from core.agent import Run

    told: set[str] = set()
    while True:
        await asyncio.sleep(5)
        for obj in gc.get_objects():
            if not isinstance(obj, Run) or obj.trace.id in told or not obj.trace.started_at:
                continue
            outbox = obj._outbox
            age = time.time() - obj.trace.started_at
            if age > after and (not obj.done or outbox.pending):
                told.add(obj.trace.id)
                stack = io.StringIO()
                stack.write(" <- ".join(_awaiting(obj._task.get_coro())) + "\n")
                pending = [type(item).__name__ for item in outbox.pending]
                sys.stderr.write(
                    f"stuck run {obj.trace.id}, {age:.0f} s: done={obj.done} "
                    f"final={obj._final is not None} pending={pending} "
                    f"waiter={outbox._waiter} timer={outbox._timer}\n{stack.getvalue()}"
                    f"locks: {await _lock_state(obj)}\n"
                )


def _awaiting(coro: Any) -> list[str]:
    """Where a suspended coroutine waits, frame by frame through what it awaits (async
    generators and context managers included, which ``Task.print_stack`` does not follow)."""
    found = []
    for _ in range(60):
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        frame = frame or getattr(coro, "gi_frame", None)
        if frame is not None:
            token = frame.f_locals.get("token")  # a Redis lock's hold: which token it tries
            found.append(
                f"{frame.f_code.co_name}:{frame.f_lineno}" + (f"[{token}]" if token else "")
            )
        inner = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "ag_await", None)
            or getattr(coro, "gi_yieldfrom", None)
        )
        if type(inner).__name__ == "async_generator_asend" and frame is not None:
            manager = frame.f_locals.get("self")  # an asynccontextmanager's __aenter__
            inner = getattr(manager, "gen", None) or inner
        if inner is None or inner is coro:
            found.append(type(coro).__name__)
            break
        coro = inner
    return found


async def _lock_state(run: Any) -> str:
    """Who holds ``run``'s conversation: the in-process lock and the shared one."""
    locks, conversation = run.agent.locks, run.trace.conversation
    said = []
    local = getattr(locks, "local", None)
    entry = local._locks.get(conversation) if local is not None else None
    if entry is not None:
        said.append(
            f"local users={entry.users} locked={entry.lock.locked()} "
            f"alive for {entry.alive_until - time.monotonic():.1f} s"
        )
    inner = getattr(locks, "inner", None)
    if inner is not None and hasattr(inner, "_tagged"):
        key = inner._tagged("lock", conversation)
        token = await inner._client.get(key)
        said.append(f"redis {key}={token} pttl={await inner._client.pttl(key)}")
    for task in asyncio.all_tasks():  # every lease renewal for this conversation, and its owner
        if task.get_name().endswith(f"the lock of {conversation}"):
            beat = task.get_coro()
            frame = getattr(beat, "cr_frame", None)
            renew = frame.f_locals.get("renew") if frame is not None else None
            owner = getattr(renew, "__closure__", None) or ()
            cells = [repr(c.cell_contents)[:60] for c in owner if _cell_full(c)]
            said.append(f"renewer {task.get_name()!r} done={task.done()} holds {cells}")
    return "; ".join(said) or "none"


def _cell_full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


class Sampler:
    """``SOAK_PROFILE=path``: where the bot's thread spends its time, sampled every 5 ms from
    another thread (its innermost frames, counted by function): a profile of the soak itself,
    at a fraction of cProfile's cost. Written to ``path`` at the end."""

    def __init__(self, path: str) -> None:
        import threading

        self.path = path
        self.target = threading.get_ident()
        self.own: dict[str, int] = {}
        self.inclusive: dict[str, int] = {}
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.005):
            frame = sys._current_frames().get(self.target)
            if frame is None:
                continue
            self.samples += 1
            seen: set[str] = set()
            first = True
            while frame is not None:
                code = frame.f_code
                name = f"{code.co_filename.rsplit('/site-packages/', 1)[-1]}:{code.co_name}"
                if first:
                    self.own[name] = self.own.get(name, 0) + 1
                    first = False
                if name not in seen:
                    seen.add(name)
                    self.inclusive[name] = self.inclusive.get(name, 0) + 1
                frame = frame.f_back

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        with open(self.path, "w") as out:
            for title, counts in (("own", self.own), ("inclusive", self.inclusive)):
                out.write(f"== {title} ({self.samples} samples)\n")
                for name, n in sorted(counts.items(), key=lambda kv: -kv[1])[:60]:
                    out.write(f"{n / max(1, self.samples):6.1%}  {name}\n")


class ObjectCounts:
    """``SOAK_OBJECTS=path``: where RSS growth is, when tracemalloc finds it is not in
    Python's heap: RSS sampled every 10 s, live objects by type, Python's allocated blocks
    and glibc's ``mallinfo2`` (bytes the C allocator holds, in use or free) at warm and at
    the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rss: list[tuple[float, ...]] = []
        self.heap_keys: list[str] = []
        self.task = asyncio.create_task(self._sample())
        self.warm: tuple[Counter[str], int, dict[str, int]] | None = None
        self.containers: dict[int, tuple[int, str]] = {}
        self.gc_warm: list[dict[str, Any]] = []
        self.gc_end: list[dict[str, Any]] = []
        self.garbage: Counter[str] = Counter()
        self.garbage_bytes = 0

    @staticmethod
    def _now() -> tuple[Counter[str], int, dict[str, int]]:
        types: Counter[str] = Counter()
        for o in gc.get_objects():
            name = _type_name(o)
            types[name] += 1
            types[f"bytes of {name}"] += sys.getsizeof(o)  # shallow: the object, not its parts
            waiting = _waiting_on(o)
            if waiting is not None:
                types[waiting] += 1
        return types, sys.getallocatedblocks(), {**_mallinfo(), **_pymalloc()}

    async def _sample(self) -> None:
        started = time.monotonic()
        while True:
            heap = {**_mallinfo(), **_pymalloc()}
            self.rss.append(
                (time.monotonic() - started, rss_bytes() / 2**20, *(heap[k] / 2**20 for k in heap))
            )
            self.heap_keys = list(heap)
            await asyncio.sleep(10)

    def at_warm(self) -> None:
        self.warm = self._now()
        self.containers = _containers()
        self.gc_warm = gc.get_stats()

    def collect_garbage(self) -> None:
        """The full collection before the end's figures, its garbage kept to be counted by
        type: what the runs left for the oldest generation to find (cycles)."""
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
        finally:
            gc.set_debug(0)
        self.garbage = Counter(_type_name(o) for o in gc.garbage)
        self.garbage_bytes = sum(sys.getsizeof(o) for o in gc.garbage)
        gc.garbage.clear()
        self.gc_end = gc.get_stats()

    def write(self, runs: int) -> None:
        self.task.cancel()
        assert self.warm is not None
        (types0, blocks0, malloc0), (types1, blocks1, malloc1) = self.warm, self._now()
        with open(self.path, "w") as out:
            arenas = os.environ.get("MALLOC_ARENA_MAX", "(unset)")
            out.write(f"== MALLOC_ARENA_MAX={arenas}; {runs} runs from warm to end\n")
            out.write(f"== RSS (s, MB), then MB of: {', '.join(self.heap_keys)}\n")
            for at, *mbs in self.rss:
                out.write(f"{at:6.0f} " + " ".join(f"{mb:8.1f}" for mb in mbs) + "\n")
            out.write(
                f"== Python allocated blocks {blocks0} -> {blocks1} ({blocks1 - blocks0:+d})\n"
            )
            out.write("== glibc mallinfo2 (MB), warm -> end\n")
            for key in malloc0:
                a, b = malloc0[key] / 2**20, malloc1[key] / 2**20
                out.write(f"{key:10} {a:8.1f} -> {b:8.1f} ({b - a:+.1f})\n")
            out.write("== collections by generation from warm to end (gc.get_stats)\n")
            for gen, (a, b) in enumerate(zip(self.gc_warm, self.gc_end, strict=True)):
                out.write(
                    f"gen {gen}: {b['collections'] - a['collections']} collections,"
                    f" {b['collected'] - a['collected']} collected\n"
                )
            out.write(
                f"== garbage the full collection at the end found: {self.garbage.total()} objects,"
                f" {self.garbage_bytes / 2**20:.1f} MB shallow; by type\n"
            )
            for name, n in self.garbage.most_common(30):
                out.write(f"{n:8d} {name}\n")
            out.write(f"== threads running: {threading.active_count()}\n")
            out.write("== threads and arrays alive, by kind\n")
            for kind, n in _kinds().most_common(12):
                out.write(f"{n:6d} {kind}\n")
            out.write("== live objects by type, grown most\n")
            grown = sorted(((types1[k] - types0.get(k, 0), k) for k in types1), reverse=True)
            for diff, name in [g for g in grown if not g[1].startswith("bytes of")][:40]:
                out.write(f"{diff:+8d} {name} ({types1[name]})\n")
            out.write("== shallow bytes by type, grown most\n")
            for diff, name in [g for g in grown if g[1].startswith("bytes of")][:25]:
                out.write(f"{diff / 1024:+8.0f} KiB {name[9:]} ({types1[name] / 2**20:.1f} MB)\n")
            out.write("== containers of 100 or more, grown most (id kept from warm: same object)\n")
            later = _containers()
            rows = [
                (n - self.containers.get(key, (0, ""))[0], n, holder)
                for key, (n, holder) in later.items()
            ]
            for diff, n, holder in sorted(rows, key=lambda r: -r[0])[:20]:
                out.write(f"{diff:+8d} -> {n:7d}  {holder}\n")


def _type_name(o: object) -> str:
    """``module.Qualname`` (builtins bare): discord.py's ``Thread`` is not ``threading``'s."""
    cls = type(o)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _waiting_on(o: object) -> str | None:
    """For a pending timer, a coroutine or an async generator: what it is (its callback or
    code), so that a growing count of them says whose they are."""
    if isinstance(o, asyncio.TimerHandle):
        callback = getattr(o, "_callback", None)
        inner = getattr(callback, "__func__", callback)
        return f"  timer -> {getattr(inner, '__qualname__', type(inner).__qualname__)}"
    code = getattr(o, "cr_code", None) or getattr(o, "ag_code", None)
    if code is not None and type(o).__name__ in ("coroutine", "async_generator"):
        return f"  {type(o).__name__} {code.co_filename.rsplit('/', 2)[-2:]} {code.co_qualname}"
    return None


def _containers() -> dict[int, tuple[int, str]]:
    """Every dict, list, deque and set of 100 or more entries, by id: its length and where
    it hangs (the holder's type and the attribute or key that names it)."""
    from collections import deque

    found: dict[int, tuple[int, str]] = {}
    candidates = [
        o for o in gc.get_objects() if type(o) in (dict, list, deque, set) and len(o) >= 100
    ]
    for o in candidates:
        found[id(o)] = (len(o), _holder(o))
    return found


def _holder(o: object) -> str:
    """``Holder.attribute`` for the first object that holds ``o`` as an attribute (through
    its ``__dict__`` or a slot), else the referrers' types."""
    seen = []
    for ref in gc.get_referrers(o):
        if type(ref).__name__ == "frame" or ref is o:
            continue
        if isinstance(ref, dict):
            key = next((k for k, v in ref.items() if v is o), None)
            owners = [
                r
                for r in gc.get_referrers(ref)
                if getattr(r, "__dict__", None) is ref and type(r).__name__ != "frame"
            ]
            if owners and key is not None:
                return f"{_type_name(owners[0])}.{key}"
            if key is not None:
                seen.append(f"dict[{str(key)[:40]}]")
                continue
        for slot in getattr(type(ref), "__slots__", ()) or ():
            if getattr(ref, slot, None) is o:
                return f"{_type_name(ref)}.{slot}"
        for key, value in (getattr(ref, "__dict__", None) or {}).items():
            if value is o:
                return f"{_type_name(ref)}.{key}"
        seen.append(_type_name(ref))
    return ", ".join(seen[:4]) or "(nobody)"


def _kinds() -> Counter[str]:
    """Live ``Thread`` objects by name and state, ``array``s by type code and who holds them."""
    kinds: Counter[str] = Counter()
    for o in gc.get_objects():
        if type(o) is threading.Thread:
            name = "".join(c for c in o.name if not c.isdigit())
            kinds[f"Thread {name} alive={o.is_alive()}"] += 1
        elif type(o).__name__ == "array":
            holders = {type(r).__qualname__ for r in gc.get_referrers(o)} - {"list", "frame"}
            kinds[f"array {o.typecode} held by {sorted(holders)[:3]}"] += 1
    return kinds


def _pymalloc() -> dict[str, int]:
    """Python's own allocator (``sys._debugmallocstats``, read from fd 2): the bytes its
    arenas hold (resident once touched) and the bytes in blocks in use; the gap is memory
    freed inside arenas that still hold a live block, which RSS keeps."""
    import tempfile

    saved = os.dup(2)
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    found: dict[str, int] = {}
    for line in text.splitlines():
        label, _, value = line.rpartition("=")
        number = value.strip().replace(",", "")
        if not number.isdigit():
            continue
        if "bytes/arena" in label:
            found["py arenas"] = int(number)
        elif label.startswith("# bytes in allocated blocks"):
            found["py in use"] = int(number)
        elif label.startswith("# bytes in available blocks"):
            found["py free in pools"] = int(number)
        elif "unused pools" in label:
            found["py free pools"] = int(number)
    return found


def _mallinfo() -> dict[str, int]:
    """glibc's ``mallinfo2``: arena (sbrk heap), hblkhd (mmapped), uordblks (in use),
    fordblks (free inside the heap), keepcost; empty where there is no glibc."""
    import ctypes

    fields = ["arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks"]
    fields += ["uordblks", "fordblks", "keepcost"]

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in fields]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        return {}
    info = libc.mallinfo2()
    return {k: getattr(info, k) for k in ("arena", "hblkhd", "uordblks", "fordblks")}


class HeapDiff:
    """``SOAK_TRACEMALLOC=path``: what the bot's heap gained in the second half of the warm
    run, by where it was allocated (``tracemalloc``, started once warm, so the start-up and
    the warm-up are not in it): a leak grows there; a cache that has filled does not.
    Written to ``path``: the top lines, then the top allocations' stacks. Tracing slows the
    process: the other figures of such a run are not comparable."""

    def __init__(self, path: str, end: float) -> None:
        import tracemalloc

        self.path, self.end = path, end
        tracemalloc.start(int(os.environ.get("SOAK_TRACEMALLOC_FRAMES") or 12))
        self.first: Any = None

    async def halfway(self) -> None:
        import tracemalloc

        await asyncio.sleep(max(0.0, (self.end - time.monotonic()) / 2))
        gc.collect()
        self.first = tracemalloc.take_snapshot()

    def write(self) -> None:
        import tracemalloc

        gc.collect()
        last = tracemalloc.take_snapshot()
        tracemalloc.stop()
        with open(self.path, "w") as out:
            by_line = last.compare_to(self.first, "lineno")
            grown = sum(stat.size_diff for stat in by_line)
            out.write(f"== grown in the second half: {grown / 2**20:.2f} MB; by line\n")
            for stat in by_line[:40]:
                out.write(f"{stat}\n")
            out.write("== alive at the end and allocated since warm, by line\n")
            for stat in last.statistics("lineno")[:40]:
                out.write(f"{stat}\n")
            out.write("== by stack\n")
            for stat in last.compare_to(self.first, "traceback")[:12]:
                out.write(f"{stat.size_diff / 1024:+.1f} KiB, {stat.count_diff:+d} blocks\n")
                for line in stat.traceback.format():
                    out.write(f"    {line}\n")


async def soak(
    platform: str,
    conversations: int,
    minutes: float,
    think: float,
    reply: str = "demo",
    chunk_interval: float = 0.02,
    max_runs: int | None = None,
) -> dict[str, Any]:
    from bot.app import App
    from bot.config import Config, Secrets

    seconds = minutes * 60
    slack_port = free_port()
    driver = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.soak",
        "--drive",
        platform,
        "--conversations",
        str(conversations),
        "--seconds",
        str(seconds),
        "--bot-port",
        str(slack_port),
        "--think",
        str(think),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=256 * 2**20,  # the figures come as one line: a few numbers per run
    )
    assert driver.stdout is not None
    hello = json.loads(await driver.stdout.readline())
    model = None
    if reply == "realistic":
        model = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.realistic_model",
            "--chunk-interval",
            str(chunk_interval),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert model.stdout is not None
        model_url = json.loads(await model.stdout.readline())["base_url"]
    load_before = os.getloadavg()
    prefix = f"reactbot-soak:{uuid.uuid4().hex[:8]}:"
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    settings: dict[str, Any] = {
        "redis": {"url": redis_url, "prefix": prefix},
        "ops": {"enabled": False},
    }
    if max_runs is not None:
        settings["agent"] = {"max_concurrent_runs": max_runs}
    if platform == "discord":
        settings["discord"] = {"api_base_url": hello["api_base_url"], "cooldown_seconds": 0}
        env = {"DISCORD_TOKEN": DISCORD_TOKEN}
    else:
        settings["slack"] = {
            "mode": "http",
            "port": slack_port,
            "api_base_url": hello["api_base_url"],
            "cooldown_seconds": 0,
            "workspace_updates_per_minute": 0,
        }
        env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SLACK_SECRET}
    if model is not None:
        settings["model"] = {"name": "soak-realistic", "base_url": model_url}
        env["OPENAI_API_KEY"] = "sk-soak"
    config = Config.model_validate({**settings, "secrets": Secrets.from_env(env)})

    app = App.create(config, demo_delay=DEMO_DELAY)
    counter = RunCounter()
    app.agent.observers.append(counter)
    figures = BotFigures()
    serve_task = asyncio.create_task(_serve(platform, app))
    lag_task = asyncio.create_task(sample_lag(figures))
    collect_every = float(os.environ.get("SOAK_COLLECT_EVERY") or 0)
    collect_task = asyncio.create_task(_collect(collect_every)) if collect_every else None
    stuck_after = float(os.environ.get("SOAK_STUCK_AFTER") or 0)
    stuck_task = asyncio.create_task(report_stuck(stuck_after)) if stuck_after else None
    profile = os.environ.get("SOAK_PROFILE")
    heap_path = os.environ.get("SOAK_TRACEMALLOC")
    objects_path = os.environ.get("SOAK_OBJECTS")
    objects = ObjectCounts(objects_path) if objects_path else None
    sampler = Sampler(profile) if profile else contextlib.nullcontext()
    try:
        sampler.__enter__()
        started = time.monotonic()
        await asyncio.sleep(seconds / 3)
        gc.collect()
        figures.rss_warm, figures.runs_warm = rss_bytes(), counter.ended
        if objects is not None:
            objects.at_warm()
        figures.cpu_warm, figures.wall_warm = time.process_time(), time.monotonic()
        untime_gc = figures.time_collections()
        heap = HeapDiff(heap_path, started + seconds) if heap_path else None
        if heap is not None:
            await heap.halfway()
        await asyncio.sleep(max(0.0, started + seconds - time.monotonic()))
        if heap is not None:
            heap.write()
        figures.cpu_end, figures.wall_end = time.process_time(), time.monotonic()
        untime_gc()
        if objects is not None:
            objects.collect_garbage()
        gc.collect()
        figures.rss_end, figures.runs_end = rss_bytes(), counter.ended
        if objects is not None:
            objects.write(figures.runs_end - figures.runs_warm)
        line = await driver.stdout.readline()  # the driver's figures, after the drain
        figures.redis_errors = app.health.failures if app.health is not None else 0
        result = {
            **_figures(platform, conversations, minutes, figures, json.loads(line)),
            "think": think,
            "reply": reply,
            "load_before": load_before,
            "load_after": os.getloadavg(),
        }
        print(report(result), flush=True)  # before the shutdown: a slow one loses nothing
    finally:
        sampler.__exit__(None, None, None)
        lag_task.cancel()
        if collect_task is not None:
            collect_task.cancel()
        if stuck_task is not None:
            stuck_task.cancel()
        serve_task.cancel()  # the bot shuts down first, its fake still answering
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await serve_task
        await app.aclose()
        with contextlib.suppress(Exception):
            await driver.communicate(b"done\n")  # now the fake may stop
        if driver.returncode is None:
            driver.kill()
        if model is not None:
            with contextlib.suppress(Exception):
                await model.communicate(b"done\n")
        await _forget(redis_url, prefix)
    return result


async def _collect(every: float) -> None:
    """``SOAK_COLLECT_EVERY=seconds``: a full collection that often (a diagnosis: RSS growth
    that this takes away was garbage in cycles left for the oldest generation)."""
    while True:
        await asyncio.sleep(every)
        gc.collect()


async def _serve(platform: str, app: Any) -> None:
    from bot.serve import collecting_old_garbage, settle_heap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # discord.py imports audioop
        from bot.serve_discord import serve_discord
        from bot.serve_slack import serve_slack

    settle_heap()
    async with collecting_old_garbage():  # as ``reactbot serve`` runs it
        await (serve_discord if platform == "discord" else serve_slack)(app)


async def _forget(url: str, prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()


def _figures(
    platform: str, conversations: int, minutes: float, bot: BotFigures, driven: dict[str, Any]
) -> dict[str, Any]:
    runs = bot.runs_end - bot.runs_warm
    growth = (bot.rss_end - bot.rss_warm) / runs * 1000 / 2**20 if runs else float("nan")
    firsts, replies = driven["first_updates"], driven["replies"]
    cpu, wall = bot.cpu_end - bot.cpu_warm, bot.wall_end - bot.wall_warm
    return {
        "cpu_share": cpu / wall if wall else float("nan"),
        "cpu_ms_per_conversation_second": cpu * 1000 / (conversations * wall)
        if wall
        else float("nan"),
        "cpu_ms_per_run": cpu * 1000 / runs if runs else float("nan"),
        "gc_full": len(bot.gc_pauses),
        "gc_max": max(bot.gc_pauses, default=0.0),
        "gc_total": sum(bot.gc_pauses),
        "platform": platform,
        "conversations": conversations,
        "minutes": minutes,
        "runs_sent": driven["sent"],
        "runs_final": driven["final"],
        "answered": driven["answered"],
        "refused": driven["refused"],
        "forgot": driven["forgot"],
        "lost": driven["sent"] - driven["final"],
        "failed": driven["final"]
        - driven["answered"]
        - driven["refused"]
        + driven["sent"]
        - driven["final"],
        "reply_p50": percentile(replies, 0.5),
        "reply_p99": percentile(replies, 0.99),
        "first_p50": percentile(firsts, 0.5),
        "first_p99": percentile(firsts, 0.99),
        "lag_p50": percentile(bot.lags, 0.5),
        "lag_p99": percentile(bot.lags, 0.99),
        "lag_max": max(bot.lags, default=float("nan")),
        "rss_warm_mb": bot.rss_warm / 2**20,
        "rss_end_mb": bot.rss_end / 2**20,
        "runs_warm_to_end": runs,
        "rss_growth_mb_per_1000": growth,
        "redis_errors": bot.redis_errors,
        "rate_limited": driven.get("rate_limited", 0),
    }


def report(f: dict[str, Any]) -> str:
    lag_ok = "OK" if f["lag_p99"] < 0.1 else "over target"
    rss_ok = "OK" if f["rss_growth_mb_per_1000"] < 5 else "over target"
    lost_ok = "OK" if f["lost"] == 0 else "FAIL"
    failed_ok = "OK" if f["failed"] == 0 else "FAIL"
    return "\n".join(
        [
            f"== {f['platform']}: {f['conversations']} conversations at once for "
            f"{f['minutes']:g} min, Redis, about {f['think']:g} s between answer and next"
            f" question, {f['reply']} replies ==",
            "load average                  "
            + " ".join(f"{x:.2f}" for x in f["load_before"])
            + " before, "
            + " ".join(f"{x:.2f}" for x in f["load_after"])
            + f" after ({os.cpu_count()} cores)",
            f"runs                          {f['runs_sent']} asked, {f['runs_final']} final:"
            f" {f['answered']} answered, {f['refused']} told the bot is busy (refusals)",
            f"failed runs (not refusals)    {f['failed']} ({failed_ok}: must be 0):"
            f" {f['forgot']} answered without memory,"
            f" {f['runs_final'] - f['answered'] - f['refused'] - f['forgot']} failed or stopped,"
            f" {f['lost']} never final",
            f"question -> reply shown       p50 {f['reply_p50'] * 1000:.0f} ms"
            f" · p99 {f['reply_p99'] * 1000:.0f} ms",
            f"question -> first live edit   p50 {f['first_p50'] * 1000:.0f} ms"
            f" · p99 {f['first_p99'] * 1000:.0f} ms",
            f"event-loop lag                p50 {f['lag_p50'] * 1000:.1f} ms"
            f" · p99 {f['lag_p99'] * 1000:.1f} ms · max {f['lag_max'] * 1000:.0f} ms"
            f" ({lag_ok}: p99 < 100 ms)",
            f"bot process CPU once warm     {f['cpu_ms_per_conversation_second']:.2f} ms per"
            f" conversation-second, {f['cpu_ms_per_run']:.1f} ms a run ({f['cpu_share'] * 100:.0f}%"
            " of a core; the fake, the driver and the model are other processes)",
            f"RSS growth once warm          {f['rss_growth_mb_per_1000']:.2f} MB per 1,000 runs"
            f" ({f['rss_warm_mb']:.0f} -> {f['rss_end_mb']:.0f} MB over"
            f" {f['runs_warm_to_end']} runs; {rss_ok}: < 5 MB)",
            f"final states lost             {f['lost']} ({lost_ok}: must be 0)",
            f"Redis calls failed            {f['redis_errors']}",
            f"full gc collections once warm {f['gc_full']}, longest {f['gc_max'] * 1000:.0f} ms,"
            f" {f['gc_total'] * 1000:.0f} ms in all (each holds the loop)",
            f"429s from the platform        {f['rate_limited']}",
        ]
    )


# ---- the platform's side (the child process) -------------------------------------------------


@dataclass
class Conversation:
    index: int
    sent: int = 0
    final: int = 0
    answered: int = 0
    refused: int = 0
    """Told the bot is busy, to ask again in a moment (``max_concurrent_runs`` or a lagging
    loop, ``ops.max_loop_lag``): a final state too, and no failure."""
    forgot: int = 0
    """Answered without the conversation's memory (a Redis call failed): a failed run."""
    replies: list[float] = field(default_factory=list)
    """Question sent -> the bot's reply (its placeholder) on the platform, per run."""
    first_updates: list[float] = field(default_factory=list)
    """Question sent -> the reply's first edit the platform took, per run."""


async def drive(
    platform: str, conversations: int, seconds: float, bot_port: int, think: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if platform == "discord":
            await _drive_discord(conversations, seconds, think)
        else:
            await _drive_slack(conversations, seconds, bot_port, think)


def _say(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


async def _until_the_bot_is_gone() -> None:
    """The bot's process says so on stdin once it has shut down (the fake serves till then)."""
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def _until(deadline: float, check: Any, *, poll: float = 0.05) -> bool:
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(poll)
    return bool(check())


async def _converse(
    conversation: Conversation, stop_at: float, ask: Any, outcome: Any, think: float
) -> None:
    """Ask, wait for the final state, ask again, until ``stop_at``; the last run gets the drain."""
    while time.monotonic() < stop_at:
        sent_at = time.monotonic()
        handle = await ask(conversation)
        conversation.sent += 1
        run = _Watch(lambda handle=handle: outcome(handle), sent_at)
        if await _until(stop_at + DRAIN_SECONDS, run.settled):
            conversation.final += 1
            conversation.answered += run.state == "answered"
            conversation.refused += run.state == "refused"
            conversation.forgot += run.state == "forgot"
        if run.reply is not None:
            conversation.replies.append(run.reply)
        if run.first is not None:
            conversation.first_updates.append(run.first)
        await asyncio.sleep(think * (0.5 + random.random()))  # reading the answer


@dataclass
class _Watch:
    """One run as the platform shows it: when its reply and first edit came, whether final."""

    outcome: Any
    sent_at: float
    reply: float | None = None
    first: float | None = None
    state: str | None = None

    def settled(self) -> bool:
        """``outcome()``: when the reply and its first edit came, and the final state the
        platform shows (``answered``; ``ended``: failed or stopped; ``refused``), or None."""
        reply_at, first_at, state = self.outcome()
        if reply_at is not None and self.reply is None:
            self.reply = reply_at - self.sent_at
        if first_at is not None and self.first is None:
            self.first = first_at - self.sent_at
        self.state = state
        return state is not None


BUSY_MARK = "answering a lot of questions"
"""In the reply the bot gives a question it has no room for (``adapters.room.BUSY``)."""
FORGOT_MARK = "memory unavailable"
"""In an answer given without the conversation's history (its Redis calls failed)."""


def _state(shown: str, stop_marker: str) -> str | None:
    """The final state a message shows (``answered``; ``forgot``: answered without memory;
    ``refused``: told the bot is busy; ``ended``: failed or stopped), or None while its Stop
    button is still there."""
    if stop_marker in shown:
        return None
    if BUSY_MARK in shown:
        return "refused"
    if FORGOT_MARK in shown:
        return "forgot"
    return "answered" if ANSWER in shown else "ended"


def asker(talk: Conversation) -> int:
    """A new person for every question: the per-user run limit counts a run until its trace
    is posted, after the final state this driver waits for."""
    return 5000 + talk.index * 100_000 + talk.sent


def slash_ask(
    fake: Any, signer: Any, talk: Conversation, channel: str, name: str
) -> tuple[str, dict[str, str]]:
    """An ``/ask`` from ``talk``'s next person in ``channel``, signed as Slack signs it."""
    body = urllib.parse.urlencode(
        {
            "command": "/ask",
            "text": QUESTION,
            "user_id": f"U{asker(talk)}",
            "user_name": f"user{talk.index}",
            "channel_id": channel,
            "team_id": "T0TEAM",
            "trigger_id": fake.trigger(),
            "response_url": fake.response_url(name),
        }
    )
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signer.generate_signature(timestamp=stamp, body=body) or "",
    }
    return body, headers


async def until_healthy(session: Any, port: int) -> None:
    """Until the bot's HTTP server on ``port`` answers ``/healthz`` (at most a minute)."""
    import aiohttp

    async with asyncio.timeout(60):
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.1)


def _summary(talks: Sequence[Conversation]) -> dict[str, Any]:
    return {
        "sent": sum(c.sent for c in talks),
        "final": sum(c.final for c in talks),
        "answered": sum(c.answered for c in talks),
        "refused": sum(c.refused for c in talks),
        "forgot": sum(c.forgot for c in talks),
        "replies": [x for c in talks for x in c.replies],
        "first_updates": [x for c in talks for x in c.first_updates],
    }


async def _drive_discord(conversations: int, seconds: float, think: float) -> None:
    from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord

    fake = FakeDiscord(token=DISCORD_TOKEN, channel_limit=(5, 5.0))
    for n in range(conversations):
        fake.add_channel(CHANNEL_ID + n)
    await fake.start()
    _say({"api_base_url": fake.api_base_url})
    replies: dict[str, int] = {}  # question id -> the bot's reply
    seen = 0

    def index_replies() -> None:
        nonlocal seen
        for mid in fake.created[seen:]:
            ref = fake.messages.get(mid, {}).get("message_reference") or {}
            if ref.get("message_id"):
                replies[str(ref["message_id"])] = mid
        seen = len(fake.created)

    edits: dict[int, float] = {}  # reply id -> when its first edit was taken
    posted: dict[str, float] = {}  # question id -> when the reply to it was taken
    scanned = 0

    def index_calls() -> None:
        nonlocal scanned
        calls = fake.calls
        for call in calls[scanned:]:
            if call.status >= 300 or not isinstance(call.json, dict):
                continue
            if call.method == "PATCH" and "/messages/" in call.path:
                edits.setdefault(int(call.path.rsplit("/", 1)[-1]), call.at)
            elif call.method == "POST" and call.path.endswith("/messages"):
                ref = call.json.get("message_reference") or {}
                if ref.get("message_id"):
                    posted.setdefault(str(ref["message_id"]), call.at)
        scanned = len(calls)

    async def ask(talk: Conversation) -> str:
        payload = fake.message_create(
            QUESTION, channel_id=CHANNEL_ID + talk.index, author_id=asker(talk)
        )
        await fake.dispatch("MESSAGE_CREATE", payload)
        return str(payload["id"])

    def outcome(question: str) -> tuple[float | None, float | None, str | None]:
        index_replies()
        index_calls()
        mid = replies.get(question)
        if mid is None:
            return posted.get(question), None, None
        message = json.dumps(fake.messages[mid])
        return posted.get(question), edits.get(mid), _state(message, "reactbot:stop:")

    try:
        async with asyncio.timeout(60):
            await fake.identified.wait()
        await asyncio.sleep(1.0)  # the guild arrives after READY
        talks = [Conversation(n) for n in range(conversations)]
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(_converse(t, stop_at, ask, outcome, think) for t in talks))
        _say({**_summary(talks), "rate_limited": fake.rate_limited})
        unfinished = [q for q, mid in replies.items() if outcome(q)[2] is None]
        for question in unfinished[:2]:  # what a run never final shows, for its diagnosis
            shown = json.dumps(fake.messages[replies[question]])
            sys.stderr.write(f"never final (question {question}): {shown[:800]} … {shown[-800:]}\n")
        await _until_the_bot_is_gone()
    finally:
        await fake.stop()


async def _drive_slack(conversations: int, seconds: float, bot_port: int, think: float) -> None:
    import aiohttp
    from slack_sdk.signature import SignatureVerifier

    from tests.fakes.slack_server import FakeSlack, Message

    signer = SignatureVerifier(SLACK_SECRET)
    url = f"http://127.0.0.1:{bot_port}/slack/events"
    async with FakeSlack() as fake, aiohttp.ClientSession() as session:
        _say({"api_base_url": fake.base_url.rstrip("/")})
        await until_healthy(session, bot_port)

        told: set[str] = set()  # the questions whose ack said to ask again later

        async def ask(talk: Conversation) -> tuple[str, int, str]:
            channel = f"C{talk.index:06d}"
            count = len(fake.roots(channel))
            name = f"soak-{talk.index}-{talk.sent}"
            body, headers = slash_ask(fake, signer, talk, channel, name)
            async with session.post(url, data=body, headers=headers) as response:
                acked = await response.text()
            if BUSY_MARK in acked:  # the ack itself says no (this replica is full or late)
                told.add(name)
            return channel, count, name

        def outcome(handle: tuple[str, int, str]) -> tuple[float | None, float | None, str | None]:
            channel, count, name = handle
            roots = fake.roots(channel)
            if len(roots) <= count:
                return None, None, "refused" if name in told else None
            root: Message = roots[count]
            posted = root.versions[0][0] if root.versions else None
            first = root.versions[1][0] if len(root.versions) > 1 else None
            if first is None:  # the placeholder (posted before the run has a Stop button)
                return posted, None, None
            return posted, first, _state(json.dumps([root.text, root.blocks]), "reactbot_stop")

        talks = [Conversation(n) for n in range(conversations)]
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(_converse(t, stop_at, ask, outcome, think) for t in talks))
        _say({**_summary(talks), "rate_limited": fake.rate_limited})
        await _until_the_bot_is_gone()


# ---- the command ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platform", choices=["discord", "slack", "all"], default="all")
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument(
        "--think",
        type=float,
        default=5.0,
        help="mean seconds a person reads an answer before asking again (0.5x to 1.5x)",
    )
    parser.add_argument("--reply", choices=["demo", "realistic"], default="demo")
    parser.add_argument(
        "--chunk-interval",
        type=float,
        default=0.02,
        help="with --reply realistic: seconds between a reply's chunks (0.02: ~230 characters/s)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        help="agent.max_concurrent_runs of the bot (default: the config's, 500)",
    )
    parser.add_argument("--drive", choices=["discord", "slack"], help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--bot-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        asyncio.run(drive(args.drive, args.conversations, args.seconds, args.bot_port, args.think))
        return 0
    platforms = ["discord", "slack"] if args.platform == "all" else [args.platform]
    failed = False
    for platform in platforms:
        figures = asyncio.run(
            soak(
                platform,
                args.conversations,
                args.minutes,
                args.think,
                args.reply,
                args.chunk_interval,
                args.max_runs,
            )
        )
        failed |= figures["failed"] != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
