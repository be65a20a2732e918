"""How long ``reactbot --help`` and ``reactbot ask`` on the demo model take to start, beside
``python -c pass``, and which imports are left.

Run: ``.venv/bin/python bench/startup.py [--rounds 15] [--top 25]``. Each round runs every
command once as a subprocess, in turn, so a busy moment on the machine hits them all alike;
a warm-up round first writes the bytecode caches. The environment is stripped of every model,
Redis and search setting, so ``ask`` uses the offline demo model and no network. It prints
min/median/max wall-clock ms per command, the median CPU ms (user + system, the command and
the children it waited for, such as the calculator's worker: steadier than wall-clock time on
a shared machine), the machine's load (``/proc/loadavg``) before and after, and the imports
that cost the most, cumulative, from ``python -X importtime``.
Targets (issue 25): ``--help`` under 150 ms, ``ask`` under 300 ms (median).

A fourth line times the imports ``ask`` cannot do without, alone: asyncio (the agent is
async), pydantic with what the config models use, and rich's console (the terminal output).
What ``ask`` takes beyond that line is the bot's own start-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

QUESTION = "What is 17*23+4?"
REPO = Path(__file__).resolve().parent.parent
"""Every command runs here: ``python -m bot`` imports ``bot`` from the working directory before
PYTHONPATH, so run from another checkout it would time that checkout's code."""
FLOOR = (
    "import asyncio, argparse; from pydantic import BaseModel, ConfigDict, Field, SecretStr, "
    "ValidationError, field_validator, model_serializer, model_validator; "
    "from rich.console import Console"
)
_SETTINGS = ("REACTBOT_", "OPENAI_", "REDIS_", "TAVILY_", "OTEL_", "DISCORD_", "SLACK_")


@dataclass(frozen=True, slots=True)
class Command:
    label: str
    argv: tuple[str, ...]


def commands(python: str) -> tuple[Command, ...]:
    bot = (python, "-m", "bot")
    return (
        Command("python -c pass", (python, "-c", "pass")),
        Command("reactbot --help", (*bot, "--help")),
        Command(f'reactbot ask "{QUESTION}"', (*bot, "ask", QUESTION)),
        Command("asyncio+pydantic+rich imports", (python, "-c", FLOOR)),
    )


def clean_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without anything that would pick a real model, Redis or a platform."""
    kept = {k: v for k, v in env.items() if not k.startswith(_SETTINGS)}
    kept["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    kept.pop("PYTHONDONTWRITEBYTECODE", None)  # a start-up is measured with its caches
    return kept


@dataclass(frozen=True, slots=True)
class Timing:
    wall_ms: float
    cpu_ms: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: Command, env: Mapping[str, str]) -> Timing:
    """Wall-clock and CPU milliseconds of one run; raises when the command fails."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        command.argv, env=env, capture_output=True, text=True, check=False, cwd=REPO
    )
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{command.label} exited {done.returncode}:\n{done.stderr}")
    return Timing(elapsed, (_children_cpu() - cpu) * 1000)


def measure(
    cmds: Sequence[Command], env: Mapping[str, str], rounds: int
) -> dict[str, list[Timing]]:
    for command in cmds:  # warm-up: bytecode caches, the page cache
        run_once(command, env)
    times: dict[str, list[Timing]] = {c.label: [] for c in cmds}
    for _ in range(rounds):
        for command in cmds:
            times[command.label].append(run_once(command, env))
    return times


@dataclass(frozen=True, slots=True)
class ImportLine:
    cumulative_us: int
    self_us: int
    depth: int
    name: str


def parse_importtime(stderr: str) -> list[ImportLine]:
    """The ``import time:`` lines of ``python -X importtime`` (other lines are skipped)."""
    lines = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        name = fields[2].rstrip()
        depth = (len(name) - len(name.lstrip(" "))) // 2
        lines.append(ImportLine(int(fields[1]), int(fields[0]), depth, name.strip()))
    return lines


def top_imports(command: Command, env: Mapping[str, str], top: int) -> list[ImportLine]:
    argv = (command.argv[0], "-X", "importtime", *command.argv[1:])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    ranked = sorted(parse_importtime(done.stderr), key=lambda i: i.cumulative_us, reverse=True)
    return ranked[:top]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15, help="runs of each command (15)")
    parser.add_argument("--top", type=int, default=25, help="import lines shown per command")
    args = parser.parse_args(argv)
    env = clean_env(os.environ)
    cmds = commands(sys.executable)
    before = loadavg()
    times = measure(cmds, env, args.rounds)
    after = loadavg()
    print(f"{os.cpu_count()} CPUs; load average (1/5/15 min) {before} before, {after} after")
    print(f"{args.rounds} rounds, interleaved; ms")
    print(f"{'command':<34} {'min':>7} {'median':>7} {'max':>7} {'CPU median':>11}")
    for label, timings in times.items():
        wall = [t.wall_ms for t in timings]
        cpu = statistics.median(t.cpu_ms for t in timings)
        print(
            f"{label:<34} {min(wall):>7.0f} {statistics.median(wall):>7.0f} "
            f"{max(wall):>7.0f} {cpu:>11.0f}"
        )
    for command in (c for c in cmds if c.label.startswith("reactbot")):
        print(f"\ntop imports of {command.label} (python -X importtime; µs, inflated by it)")
        print(f"{'cumulative':>10} {'self':>8}  module")
        for line in top_imports(command, env, args.top):
            print(f"{line.cumulative_us:>10} {line.self_us:>8}  {'  ' * line.depth}{line.name}")


if __name__ == "__main__":
    main()
