"""The assembled app on a real Redis: history across commands, stored traces, Redis down."""

from __future__ import annotations

import io
import json
from pathlib import Path

from bot.cli import run_cli
from tests.fakes.openai_server import FakeOpenAI


def write_config(tmp_path: Path, prefix: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"redis:\n  prefix: '{prefix}'\n")
    return str(path)


async def cli(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(list(argv), env=env, stdout=out)
    return code, out.getvalue()


async def test_history_and_traces_survive_between_commands(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    config = write_config(tmp_path, redis_prefix)
    async with FakeOpenAI(model="m") as fake:
        fake.reply("Thought: greet\nAction: finish[Hello Ada.]")
        fake.reply("Thought: I remember\nAction: finish[You are Ada.]")
        env = {"REDIS_URL": redis_url, "REACTBOT_MODEL": "m", "OPENAI_BASE_URL": fake.base_url}
        code, _ = await cli("--config", config, "ask", "--conversation", "c1", "I am Ada", env=env)
        assert code == 0
        code, out = await cli(
            "--config", config, "ask", "--conversation", "c1", "Who am I?", env=env
        )
        assert code == 0 and "You are Ada." in out
        second = fake.requests[1]["messages"]
        assert {"role": "user", "content": "Question: I am Ada"} in second
        assert {"role": "assistant", "content": "Hello Ada."} in second

        code, listing = await cli(
            "--config", config, "trace", "list", "--conversation", "c1", env=env
        )
        assert code == 0 and "Who am I?" in listing and "I am Ada" in listing
        newest = listing.split()[0]
        code, shown = await cli("--config", config, "trace", "show", newest, env=env)
        assert code == 0 and "**Question:** Who am I?" in shown
        target = tmp_path / "t.json"
        code, _ = await cli("--config", config, "trace", "export", newest, str(target), env=env)
        assert code == 0 and json.loads(target.read_text())["answer"] == "You are Ada."


async def test_redis_down_answers_without_memory_and_says_so(tmp_path: Path) -> None:
    config = write_config(tmp_path, "reactbot-test-down:")
    env = {"REDIS_URL": "redis://127.0.0.1:1/0"}  # nothing listens on port 1
    code, out = await cli("--config", config, "ask", "--conversation", "c", "What is 2+2?", env=env)
    assert code == 0
    assert "memory unavailable" in out
    assert "Answer: 2+2 = 4" in out


async def test_reset_with_redis_down_says_nothing_was_cleared(tmp_path: Path) -> None:
    config = write_config(tmp_path, "reactbot-test-down:")
    out = io.StringIO()
    code = await run_cli(
        ["--config", config, "chat"],
        env={"REDIS_URL": "redis://127.0.0.1:1/0"},
        stdin=io.StringIO("/reset\n"),
        stdout=out,
    )
    assert code == 0
    assert "Memory is unavailable right now: nothing was cleared." in out.getvalue()
