"""``reactbot eval evals/demo.jsonl`` in text and tools mode, side by side, against the local
OpenAI-compatible fake (real HTTP, the real ``openai`` client, a price in the config): the
table in the README's "Measure before you switch" section comes from this script.

    .venv/bin/python bench/eval_fake.py [OUT_DIR]

The fake answers from a script written here, the same for every run: in text mode one reply
breaks the format (and is re-asked) and one answer is wrong; in tools mode all are right.
Token counts are the fake's own (``FakeUsage``), so the costs are exact to the price.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bot.cli import run_cli  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, FakeUsage  # noqa: E402

PRICE = {"input": 0.15, "output": 0.60, "cached_input": 0.075}
"""USD per million tokens, as for a small hosted model."""
INPUTS = {"calculate": "expression", "lookup": "query"}


@dataclass(frozen=True, slots=True)
class Scripted:
    """One case's run: a tool call, then the answer (``wrong_in_text``: a wrong one in text
    mode; ``reask_in_text``: a reply without the format first)."""

    tool: str
    argument: str
    answer: str
    wrong_in_text: str | None = None
    reask_in_text: bool = False


DEMO_CASES = (
    Scripted("calculate", "6*7", "6*7 = 42"),
    Scripted("calculate", "17*23+4", "17*23+4 = 395"),
    Scripted("calculate", "2340*15/100", "15% of 2340 is 351"),
    Scripted("calculate", "2^10", "2^10 = 1024"),
    Scripted("calculate", "sqrt(144)+1", "sqrt(144) + 1 = 13", reask_in_text=True),
    Scripted("calculate", "22/7", "22/7 ≈ 3.142857", wrong_in_text="22/7 is about 3.14"),
    Scripted(
        "lookup", "trace of a run", "The trace shows every step: thought, action, observation."
    ),
    Scripted("lookup", "Redis setup", "Set REDIS_URL to point the bot at Redis."),
)


def script(fake: FakeOpenAI, mode: str) -> None:
    """Queue every demo case's replies in ``mode``, in the file's order."""
    for case in DEMO_CASES:
        first, second = FakeUsage(610, 42, cached_tokens=512), FakeUsage(700, 30)
        if mode == "tools":
            arguments = json.dumps({INPUTS[case.tool]: case.argument})
            fake.reply("", tool_calls=[FakeToolCall(case.tool, arguments)], usage=first)
            fake.reply(case.answer, usage=second)
            continue
        if case.reask_in_text:
            fake.reply(f"I think it is {case.answer}.", usage=FakeUsage(590, 12))
        fake.reply(
            f"Thought: I will use {case.tool}.\nAction: {case.tool}[{case.argument}]", usage=first
        )
        answer = case.wrong_in_text or case.answer
        fake.reply(f"Thought: I have it.\nAction: finish[{answer}]", usage=second)


async def run(out: Path) -> tuple[int, str]:
    async with FakeOpenAI(model="fake-small") as fake:
        script(fake, "text")
        script(fake, "tools")
        config = out / "reactbot.yaml"
        env = {
            "REACTBOT_MODEL": "fake-small",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-key",
        }
        shown = io.StringIO()
        argv = ["--config", str(config), "eval", str(REPO / "evals" / "demo.jsonl")]
        argv += ["--mode", "text", "--mode", "tools", "--concurrency", "1", "--out", str(out)]
        code = await run_cli(argv, env=env, stdout=shown)
        fake.assert_complete()
        return code, shown.getvalue()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="eval-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "reactbot.yaml").write_text(
        "model:\n  price: " + json.dumps(PRICE) + "\ntools:\n  search:\n    enabled: false\n"
    )
    code, shown = asyncio.run(run(out))
    print(shown, end="")
    print(f"(exit {code})")


if __name__ == "__main__":
    main()
