"""``reactbot eval evals/memory.jsonl`` with memory and without (``memory.enabled: false``),
against the local OpenAI-compatible fake: real HTTP, the real ``openai`` client, the real
store, recall and fence. Prints both tables and the accuracy of each.

    .venv/bin/python bench/memory_eval.py [--redis URL]

What is measured is the pipeline, not a model's judgement: the fake answers each question
from what its prompt holds. Told "Remember ...", it calls ``remember`` with the fact (and
``forget`` for "Forget ..."); asked the question later, in another conversation, it gives the
fact's answer only when the fact is inside the ``<memory>`` block it was sent, else "I don't
know" ("unknown" for the control case). So the gain printed is exactly what memories carry
from one conversation to another; a real model's figure needs ``reactbot eval`` with a key.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bot.cli import run_cli  # noqa: E402
from core.prompt import MEMORY_LEAD, QUESTION_PREFIX  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

CASES_FILE = REPO / "evals" / "memory.jsonl"
PREFIX = "bench-memory-eval:"


@dataclass(frozen=True, slots=True)
class Told:
    """One case as the fake plays it: the action each ``before`` question takes, and the
    answer it gives when ``keyword`` is among the memories it was sent."""

    actions: tuple[str, ...]
    question: str
    keyword: str
    answer: str
    otherwise: str = "I don't know."


def _remember(fact: str) -> str:
    return "remember" + json.dumps({"fact": fact}).join("[]")


PLAYED = {
    "memory/team": Told(
        (_remember("I manage the payments team"),), "", "payments", "The payments team."
    ),
    "memory/deploy-day": Told(
        (_remember("My team deploys on Thursdays"),), "", "Thursdays", "On Thursdays."
    ),
    "memory/name": Told((_remember("Call me Ada"),), "", "Ada", "I call you Ada."),
    "memory/number": Told(
        (_remember("My employee number is 48213"),), "", "48213", "Your number is 48213."
    ),
    "memory/editor": Told(
        (_remember("I write my code in Helix, not Vim"),), "", "Helix", "You use Helix."
    ),
    "memory/forgotten": Told(
        (_remember("My favourite colour is teal"), "forget[favourite colour]"),
        "",
        "teal",
        "Teal.",
        otherwise="unknown",
    ),
}


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body.get("messages") or [])


def _asks(question: str) -> Any:
    return lambda body: _messages(body)[-1].get("content") == QUESTION_PREFIX + question


def _after(action: str) -> Any:
    def seen(body: dict[str, Any]) -> bool:
        messages = _messages(body)
        last = str(messages[-1].get("content", ""))
        return last.startswith("Observation:") and any(
            m.get("role") == "assistant" and action in str(m.get("content", "")) for m in messages
        )

    return seen


def _recalls(question: str, keyword: str, *, present: bool) -> Any:
    asked = _asks(question)

    def seen(body: dict[str, Any]) -> bool:
        memories = [
            str(m.get("content", ""))
            for m in _messages(body)
            if str(m.get("content", "")).startswith(MEMORY_LEAD)
        ]
        return asked(body) and any(keyword in m for m in memories) is present

    return seen


def script(fake: FakeOpenAI) -> int:
    """Queue every case's replies; how many will be left (one branch of each question)."""
    cases = [json.loads(line) for line in CASES_FILE.read_text().splitlines() if line[:1] == "{"]
    for case in cases:
        told = PLAYED[case["id"]]
        for before, action in zip(case["before"], told.actions, strict=True):
            fake.reply(f"Thought: I keep that.\nAction: {action}", when=_asks(before))
            fake.reply("Thought: done.\nAction: finish[OK.]", when=_after(action))
        question = case["question"]
        found = _recalls(question, told.keyword, present=True)
        fake.reply(f"Thought: I know it.\nAction: finish[{told.answer}]", when=found)
        missing = _recalls(question, told.keyword, present=False)
        fake.reply(f"Thought: not known.\nAction: finish[{told.otherwise}]", when=missing)
    return len(cases)


async def one_run(out: Path, *, memory: bool, redis: str | None) -> tuple[int, str]:
    async with FakeOpenAI(model="fake-small") as fake:
        left = script(fake)
        env = {
            "REACTBOT_MODEL": "fake-small",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-key",
            "REACTBOT_MEMORY__ENABLED": "true" if memory else "false",
            **({"REDIS_URL": redis, "REACTBOT_REDIS__PREFIX": PREFIX} if redis else {}),
        }
        shown = io.StringIO()
        where = out / ("with-memory" if memory else "without-memory")
        argv = ["eval", str(CASES_FILE), "--concurrency", "1", "--out", str(where)]
        code = await run_cli(argv, env=env, stdout=shown)
        if fake.pending != left:
            raise SystemExit(f"the fake has {fake.pending} replies left, expected {left}")
        accuracy = json.loads((where / "results.json").read_text())["accuracy"]
        return (
            code,
            f"{shown.getvalue()}accuracy {'with' if memory else 'without'} memory: {accuracy:.0%}\n",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", help="keep the memories on this Redis (default: in memory)")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="memory-eval-"))
    for memory in (True, False):
        code, shown = asyncio.run(one_run(out, memory=memory, redis=args.redis))
        print(shown, end="")
        print(f"(exit {code})\n")
    if args.redis:
        asyncio.run(tidy(args.redis))


async def tidy(url: str) -> None:
    """Delete what the runs stored under the bench's prefix (its memories are cleared by
    the eval itself after each case; traces and histories are left to their TTLs otherwise)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{PREFIX}*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


if __name__ == "__main__":
    main()
