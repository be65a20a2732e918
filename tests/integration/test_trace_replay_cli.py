"""``reactbot trace replay`` and ``trace diff`` end to end: traces stored in a real Redis by
one command and replayed by the next, on the offline demo model and on the local
OpenAI-compatible fake with the real ``openai`` client; without Redis, what is said."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from bot.cli import run_cli
from bot.web import LinkSigner
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-test-DO-NOT-PRINT-1234567890"


@pytest.fixture
def config(tmp_path: Path, redis_prefix: str) -> Path:
    path = tmp_path / "reactbot.yaml"
    path.write_text(f"redis:\n  prefix: '{redis_prefix}'\n")
    return path


@pytest.fixture
def redis_env(redis_url: str) -> dict[str, str]:
    return {"REDIS_URL": redis_url}


async def cli(*args: str, config: Path | None, env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    argv = (["--config", str(config)] if config is not None else []) + list(args)
    code = await run_cli(argv, env=env, stdout=out)
    return code, out.getvalue()


async def newest_trace_id(config: Path, env: dict[str, str], conversation: str) -> str:
    code, listing = await cli(
        "trace", "list", "--conversation", conversation, config=config, env=env
    )
    assert code == 0 and listing.strip(), listing
    return listing.split()[0]


def flat(output: str) -> str:
    """The output with its line breaks (a sentence wrapped at the console width) as spaces."""
    return " ".join(output.split())


def stored_id(output: str) -> str:
    found = re.search(r"Replay stored as trace (\w+) \(replay of (\w+)\)", output)
    assert found is not None, output
    return found.group(1)


# ---- the offline demo model -------------------------------------------------------------


async def test_replay_on_the_demo_model_in_another_mode_answers_from_the_trace(
    config: Path, redis_env: dict[str, str]
) -> None:
    code, _ = await cli(
        "ask", "--conversation", "c1", "What is 17*23+4?", config=config, env=redis_env
    )
    assert code == 0
    original = await newest_trace_id(config, redis_env, "c1")

    code, out = await cli(
        "trace", "replay", original, "--mode", "tools", config=config, env=redis_env
    )
    assert code == 0, out
    assert f"Replaying trace {original} on offline demo model" in out
    assert "Action: calculate[17*23+4]" in out  # the replay, streamed
    assert "Observation (replayed): 395" in out  # in the comparison
    assert f"A: {original}" in out and "(replay of " + original + ")" in out
    assert "text mode" in out and "tools mode" in out
    assert "▶ 2" in out  # the tools-mode answer step carries no thought: the first difference
    assert "\x1b[" not in out  # piped: plain
    replay = stored_id(out)

    code, shown = await cli("trace", "show", replay, config=config, env=redis_env)
    assert code == 0
    assert f"**Replay of:** {original}" in shown and "**Observation (replayed):**" in shown

    export = config.parent / "replay.json"
    code, _ = await cli("trace", "export", replay, str(export), config=config, env=redis_env)
    data = json.loads(export.read_text())
    assert data["replay_of"] == original and data["mode"] == "tools"
    assert data["steps"][0]["replayed"] is True and data["steps"][0]["observation"] == "395"

    code, listing = await cli("trace", "list", "--conversation", "c1", config=config, env=redis_env)
    assert replay in listing and original in listing  # the replay is filed with the original

    code, out = await cli("trace", "diff", original, replay, config=config, env=redis_env)
    assert code == 0 and "First difference at step 2" in out
    code, out = await cli("trace", "diff", original, original, config=config, env=redis_env)
    assert code == 0 and "The two runs took the same steps and gave the same answer." in out


async def test_replay_and_diff_print_the_signed_side_by_side_link_when_pages_are_on(
    tmp_path: Path, redis_prefix: str, redis_env: dict[str, str]
) -> None:
    config = tmp_path / "pages.yaml"
    config.write_text(
        f"redis:\n  prefix: '{redis_prefix}'\n"
        "web:\n  enabled: true\n  public_url: https://bot.example.com\n"
    )
    env = {**redis_env, "REACTBOT_LINK_SECRET": "a-link-secret-for-tests"}
    code, _ = await cli("ask", "--conversation", "c9", "What is 2+2?", config=config, env=env)
    assert code == 0
    original = await newest_trace_id(config, env, "c9")
    code, out = await cli("trace", "replay", original, "--mode", "tools", config=config, env=env)
    assert code == 0, out
    replay = stored_id(out)
    found = re.search(r"Side by side: (\S+)", out)
    assert found is not None, out
    link = found.group(1)
    assert link.startswith(f"https://bot.example.com/t/{original}/vs/{replay}?exp=")
    signer = LinkSigner("a-link-secret-for-tests", public_url="https://bot.example.com")
    query = dict(part.split("=") for part in link.split("?")[1].split("&"))
    assert signer.check(original, replay, exp=query["exp"], sig=query["sig"])
    code, out = await cli("trace", "diff", original, replay, config=config, env=env)
    assert code == 0 and f"Side by side: https://bot.example.com/t/{original}/vs/{replay}?" in out
    plain = tmp_path / "plain.yaml"
    plain.write_text(f"redis:\n  prefix: '{redis_prefix}'\n")
    code, out = await cli("trace", "diff", original, replay, config=plain, env=redis_env)
    assert code == 0 and "Side by side" not in out  # pages off: no link, no noise


async def test_diff_of_an_unknown_trace_names_it_and_exits_1(
    config: Path, redis_env: dict[str, str]
) -> None:
    code, _ = await cli("ask", "--conversation", "c2", "What is 2+2?", config=config, env=redis_env)
    known = await newest_trace_id(config, redis_env, "c2")
    code, out = await cli("trace", "diff", known, "nope123", config=config, env=redis_env)
    assert code == 1 and "No stored trace with id nope123." in out
    assert "Without Redis" not in out  # Redis is configured: the id is simply unknown


async def test_without_redis_a_new_command_cannot_find_the_trace_and_says_why() -> None:
    code, out = await cli("trace", "replay", "abc123", config=None, env={})
    assert code == 1
    assert "No stored trace with id abc123." in out
    assert "Without Redis, traces live only as long as the process that made them" in out
    assert "REDIS_URL" in out
    code, out = await cli("trace", "diff", "abc123", "def456", config=None, env={})
    assert code == 1 and "No stored trace with id abc123." in out


async def test_an_unreachable_redis_is_named_not_taken_for_a_missing_trace() -> None:
    env = {"REDIS_URL": "redis://127.0.0.1:1/0"}  # nothing listens on port 1
    code, out = await cli("trace", "replay", "abc123", config=None, env=env)
    assert code == 1
    assert "Cannot reach Redis at 127.0.0.1:1/0: trace abc123 cannot be read." in out
    assert "No stored trace" not in out
    code, out = await cli("trace", "diff", "abc123", "def456", config=None, env=env)
    assert code == 1 and "Cannot reach Redis at 127.0.0.1:1/0" in out


async def test_model_flag_without_an_endpoint_is_refused_in_one_line(
    config: Path, redis_env: dict[str, str]
) -> None:
    code, _ = await cli("ask", "--conversation", "c3", "What is 3*3?", config=config, env=redis_env)
    original = await newest_trace_id(config, redis_env, "c3")
    code, out = await cli(
        "trace", "replay", original, "--model", "gpt-x", config=config, env=redis_env
    )
    assert code == 2
    assert "--model gpt-x needs a model endpoint" in out and "REACTBOT_MODEL" in out


def test_the_real_command_across_processes_fits_a_narrow_pipe(
    config: Path, redis_env: dict[str, str]
) -> None:
    """Two processes (``python -m bot``, this worktree's code): the trace stored by the
    first is replayed by the second, whose output fits COLUMNS=50, one run above the other."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/tmp", **redis_env, "COLUMNS": "50"}

    def reactbot(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "bot", "--config", str(config), *args]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=60, env=env, cwd=REPO
        )

    asked = reactbot("ask", "--conversation", "p", "What is 12*12?")
    assert asked.returncode == 0, asked.stderr
    listing = reactbot("trace", "list", "--conversation", "p")
    original = listing.stdout.split()[0]
    replayed = reactbot("trace", "replay", original, "--mode", "json")
    assert replayed.returncode == 0, replayed.stderr
    out = replayed.stdout
    comparison = out[out.index("\nA: ") :]  # after the replay's own streamed steps
    assert "\nB Thought:" in comparison  # stacked: the B side under the A side
    assert "Observation (replayed): 144" in comparison
    assert all(cell_len(line) <= 50 for line in comparison.splitlines()), comparison
    assert "Replay stored as trace" in comparison


# ---- the OpenAI-compatible fake, real openai client -------------------------------------


def fake_env(fake: FakeOpenAI, redis_env: dict[str, str]) -> dict[str, str]:
    return {
        **redis_env,
        "REACTBOT_MODEL": "fake-model",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": SECRET,
    }


async def record_original(fake: FakeOpenAI, config: Path, env: dict[str, str]) -> str:
    fake.reply("Thought: Arithmetic.\nAction: calculate[6*7]").reply(
        "Thought: Done.\nAction: finish[6*7 is 42.]"
    )
    code, _ = await cli("ask", "--conversation", "oa", "What is 6*7?", config=config, env=env)
    assert code == 0
    return await newest_trace_id(config, env, "oa")


async def test_replay_with_another_model_on_the_fake_endpoint(
    config: Path, redis_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI(model="fake-model") as fake:
        env = fake_env(fake, redis_env)
        original = await record_original(fake, config, env)
        fake.reply(
            "",
            tool_calls=(FakeToolCall("calculate", '{"expression": " 6*7 "}'),),
        ).reply("It is 42.")
        code, out = await cli(
            "trace",
            "replay",
            original,
            "--model",
            "other-model",
            "--mode",
            "tools",
            config=config,
            env=env,
        )
        fake.assert_complete()
    assert code == 0, out
    assert [r["model"] for r in fake.requests] == ["fake-model"] * 2 + ["other-model"] * 2
    assert fake.requests[2]["tools"][0]["function"]["name"] == "calculate"
    tool_message = fake.requests[3]["messages"][-1]
    assert tool_message["role"] == "tool" and "42" in tool_message["content"]
    assert "Observation (replayed): 42" in out
    assert "fake-model" in out and "other-model" in out
    # the same call at step 1 (only the wording of the thought differs), another answer
    assert "≠ 1" in out and "▶ answer" in out
    assert "First difference at the answer: answer." in out
    assert "Observation: 42\n  ↺ replayed from the original trace\n" in out  # streamed
    assert SECRET not in out + capsys.readouterr().err


async def test_an_unrecorded_call_stops_the_replay_unless_live_tools(
    config: Path, redis_env: dict[str, str]
) -> None:
    async with FakeOpenAI(model="fake-model") as fake:
        env = fake_env(fake, redis_env)
        original = await record_original(fake, config, env)
        fake.reply("Thought: Let me check.\nAction: calculate[7*6]")
        code, out = await cli("trace", "replay", original, config=config, env=env)
        fake.assert_complete()
        assert code == 1, out
        assert "⏹ Stopped by the replay after step 1." in out
        assert (
            "Why: the replay stopped at calculate[7*6]: the original run made no such call, "
            "and live tools are off (--live-tools runs it)." in flat(out)
        )
        assert "▶ 1" in out and "First difference at step 1: tool input, observation" in out
        stopped = stored_id(out)
        code, shown = await cli("trace", "show", stopped, config=config, env=env)
        assert "**Answer (cancelled):**" in shown and "live tools are off" in shown

        fake.reply("Thought: Let me check.\nAction: calculate[7*6]").reply(
            "Thought: Same.\nAction: finish[42]"
        )
        code, out = await cli("trace", "replay", original, "--live-tools", config=config, env=env)
        fake.assert_complete()
    assert code == 0, out
    assert "Observation: 42" in out and "Observation (replayed)" not in out  # it ran live


async def test_replay_with_a_prompt_file(
    config: Path, redis_env: dict[str, str], tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are terse.\nTools:\n{tools}\nFormat: Thought/Action.", encoding="utf-8")
    async with FakeOpenAI(model="fake-model") as fake:
        env = fake_env(fake, redis_env)
        original = await record_original(fake, config, env)
        fake.reply("Thought: Known.\nAction: finish[42]")
        code, out = await cli(
            "trace", "replay", original, "--prompt", str(prompt), config=config, env=env
        )
        fake.assert_complete()
        system = fake.requests[-1]["messages"][0]
        assert system["role"] == "system"
        assert system["content"].startswith("You are terse.\nTools:\n- calculate:")
        assert code == 0, out
        assert "custom" in out and "built-in" in out  # the two run heads say which prompt
        replay = stored_id(out)
        export = tmp_path / "replay.json"
        await cli("trace", "export", replay, str(export), config=config, env=env)
        assert json.loads(export.read_text())["system_prompt"] == prompt.read_text()

        fake.reply("Thought: Known.\nAction: finish[42]")  # a replay of the replay keeps it
        code, out = await cli("trace", "replay", replay, config=config, env=env)
        fake.assert_complete()
        assert fake.requests[-1]["messages"][0]["content"] == system["content"]

        code, out = await cli(
            "trace",
            "replay",
            original,
            "--prompt",
            str(tmp_path / "missing.txt"),
            config=config,
            env=env,
        )
        assert code == 2 and "cannot read the prompt file" in out


def test_the_readme_command_table_covers_replay_and_diff() -> None:
    from bot.cli import build_parser

    rows = [
        line
        for line in (REPO / "README.md").read_text().splitlines()
        if line.startswith("| `reactbot trace")
    ]
    replay = next(row for row in rows if "`reactbot trace replay ID" in row)
    assert "`reactbot trace diff A B`" in "\n".join(rows)
    subparsers = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    trace_parser = subparsers["trace"]
    replay_parser = trace_parser._subparsers._group_actions[0].choices["replay"]  # type: ignore[union-attr]
    flags = {s for a in replay_parser._actions for s in a.option_strings if s.startswith("--")}
    assert flags == {"--help", "--config", "--model", "--mode", "--prompt", "--live-tools"}
    assert all(flag in replay for flag in flags - {"--help", "--config"})  # (global options)


@pytest.fixture
def catalogue_config(config: Path) -> Path:
    config.write_text(
        config.read_text() + "models:\n  big: {name: catalogue-model}\n", encoding="utf-8"
    )
    return config


async def test_replay_model_names_a_catalogue_entry(
    catalogue_config: Path, redis_env: dict[str, str]
) -> None:
    config = catalogue_config
    async with FakeOpenAI(model="fake-model") as fake:
        env = fake_env(fake, redis_env)
        original = await record_original(fake, config, env)
        fake.reply("Thought: Same.\nAction: calculate[6*7]").reply("Answer: 42")
        code, out = await cli("trace", "replay", original, "--model", "big", config=config, env=env)
        fake.assert_complete()
    assert code == 0, out
    assert [r["model"] for r in fake.requests][-2:] == ["catalogue-model"] * 2
