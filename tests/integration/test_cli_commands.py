"""What a newcomer meets on the command line (issue 15, "Commands"): Redis out of reach,
traces of every conversation, history without Redis, --config anywhere, --version, help,
serve naming what is missing, empty and dash-led questions. In-process runs share the code
of ``reactbot``; the subprocess runs use ``python -m bot``, the console script's entry."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import question_args, run_cli

REPO = Path(__file__).resolve().parents[2]
CLEAN_ENV = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}


def reactbot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**CLEAN_ENV, **(env or {})},
        cwd=REPO,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hanging_redis() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["closed", "hanging"])
def test_trace_commands_say_redis_is_out_of_reach(
    kind: str, request: pytest.FixtureRequest
) -> None:
    port = closed_port() if kind == "closed" else request.getfixturevalue("hanging_redis")
    env = {"REDIS_URL": f"redis://:pw-secret@127.0.0.1:{port}/0"}
    for args in (
        ["trace", "list"],
        ["trace", "list", "--conversation", "x"],
        ["trace", "show", "abc"],
    ):
        result = reactbot(*args, env=env)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert f"cannot reach Redis at 127.0.0.1:{port}" in result.stderr
        assert "No stored traces" not in result.stdout + result.stderr
        assert "No stored trace with id" not in result.stderr
        assert "pw-secret" not in result.stdout + result.stderr
        assert "answering without memory" not in result.stderr  # a run's warning, not ours


def config_with_prefix(tmp_path: Path, prefix: str) -> str:
    path = tmp_path / "redis.yaml"
    path.write_text(f'redis:\n  prefix: "{prefix}"\n')
    return str(path)


async def test_trace_list_without_conversation_lists_every_conversation(
    tmp_path: Path, redis_url: str, redis_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_with_prefix(tmp_path, redis_prefix)
    env = {"REDIS_URL": redis_url}
    for conversation, question in (("alpha", "What is 2+3?"), ("beta", "What is 4*4?")):
        argv = ["ask", "--conversation", conversation, question, "--config", config]
        assert await run_cli(argv, env=env, stdout=io.StringIO()) == 0
        await asyncio.sleep(0.01)  # distinct start times
    capsys.readouterr()
    out = io.StringIO()
    assert await run_cli(["trace", "list", "--config", config], env=env, stdout=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "beta" in lines[0] and "4*4" in lines[0]  # newest first, with its conversation
    assert "alpha" in lines[1] and "2+3" in lines[1]
    only = io.StringIO()
    argv = ["--config", config, "trace", "list", "--conversation", "alpha"]
    assert await run_cli(argv, env=env, stdout=only) == 0
    assert len(only.getvalue().splitlines()) == 1 and "2+3" in only.getvalue()
    assert "note:" not in capsys.readouterr().err  # no demo or search notes for traces


async def test_notes_are_not_printed_for_trace_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    assert await run_cli(["trace", "list"], env={}, stdout=out) == 0
    err = capsys.readouterr().err
    assert "offline demo model" not in err and "Web search is disabled" not in err
    assert "No stored traces." in out.getvalue()


async def test_ask_with_a_conversation_and_no_redis_says_history_lasts_for_this_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    code = await run_cli(["ask", "--conversation", "x", "What is 1+1?"], env={}, stdout=out)
    assert code == 0
    err = capsys.readouterr().err
    assert err.count("lasts only for this process") == 1, err
    assert await run_cli(["ask", "What is 1+1?"], env={}, stdout=io.StringIO()) == 0
    assert "lasts only for this process" not in capsys.readouterr().err


def test_config_before_or_after_the_subcommand(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("agent:\n  max_stpes: 3\n")
    for args in (
        ["--config", str(config), "ask", "hi"],
        ["ask", "--config", str(config), "hi"],
        ["ask", "hi", "--config", str(config)],
        ["trace", "list", "--config", str(config)],
        ["trace", "--config", str(config), "list"],
        ["tools", "--config", str(config)],
    ):
        result = reactbot(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "agent.max_stpes" in result.stderr


def test_version_help_and_trace_alone() -> None:
    version = reactbot("--version")
    assert version.returncode == 0 and version.stdout.startswith("reactbot ")
    assert version.stdout.split()[1][0].isdigit()
    help_text = " ".join(reactbot("ask", "--help").stdout.split())
    for option in ("QUESTION", "--conversation", "--mode", "--approve", "--config"):
        described = help_text.split(option, 2)[-1].strip()  # what follows its last mention
        assert described and not described.startswith("-"), option
    assert "the question" in help_text and "whose history" in help_text
    trace = reactbot("trace")
    assert trace.returncode == 0, trace.stderr
    for name in ("list", "show", "export"):
        assert f"    {name} " in trace.stdout
    assert "error" not in trace.stderr


@pytest.mark.parametrize(
    ("env", "args", "says", "never"),
    [
        (
            {"SLACK_BOT_TOKEN": "xoxb-1"},
            [],
            ["SLACK_APP_TOKEN", "Socket Mode", "Slack"],
            ["No platform is configured"],
        ),
        (
            {"DISCORD_TOKEN": "d-token"},
            ["--platform", "slack"],
            ["Slack is not configured", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "--platform discord"],
            ["No platform is configured", "nothing to serve"],
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"},
            ["--platform", "discord"],
            ["Discord is not configured", "DISCORD_TOKEN", "--platform slack"],
            ["No platform is configured", "SLACK_BOT_TOKEN"],
        ),
        ({}, [], ["DISCORD_TOKEN", "SLACK_BOT_TOKEN", "No platform is configured"], []),
    ],
)
def test_serve_names_what_is_missing(
    env: dict[str, str], args: list[str], says: list[str], never: list[str]
) -> None:
    result = reactbot("serve", *args, env=env)
    assert result.returncode == 2
    for text in says:
        assert text in result.stderr, (text, result.stderr)
    for text in never:
        assert text not in result.stderr, (text, result.stderr)


def test_serve_in_http_mode_names_the_signing_secret(tmp_path: Path) -> None:
    config = tmp_path / "http.yaml"
    config.write_text("slack:\n  mode: http\n")
    result = reactbot("serve", "--config", str(config), env={"SLACK_BOT_TOKEN": "xoxb-1"})
    assert result.returncode == 2 and "SLACK_SIGNING_SECRET" in result.stderr
    assert "SLACK_APP_TOKEN" not in result.stderr


@pytest.mark.parametrize("question", [[], [""], ["   "], ["\t", " "]])
def test_an_empty_question_exits_1(question: list[str]) -> None:
    result = reactbot("ask", *question)
    assert result.returncode == 1
    assert result.stderr.startswith("empty question")
    assert result.stdout == ""


def test_a_question_may_start_with_a_dash() -> None:
    result = reactbot("ask", "-5+3", "--mode", "json")
    assert result.returncode == 0, result.stderr
    assert "Action: calculate[-5+3]" in result.stdout and "Answer: -5+3 = -2" in result.stdout
    assert "json mode" in result.stdout
    typo = reactbot("ask", "--mdoe", "json", "hi")
    assert typo.returncode == 2 and "--mdoe" in typo.stderr  # a misspelt option is named


def test_question_args_keep_options_and_move_the_words_after_a_separator() -> None:
    assert question_args(["ask", "-x", "y"]) == ["ask", "--", "-x", "y"]
    assert question_args(["--config", "c", "ask", "q", "--mode=json"]) == [
        "--config",
        "c",
        "ask",
        "--mode=json",
        "--",
        "q",
    ]
    assert question_args(["ask", "--mode", "text", "--", "--mode"]) == [
        "ask",
        "--mode",
        "text",
        "--",
        "--mode",
    ]
    assert question_args(["trace", "show", "-1"]) == ["trace", "show", "-1"]


# ---- model errors (issue 15) ----------------------------------------------------------------

SECRET = "sk-test-DO-NOT-PRINT-1234567890"


async def test_a_model_error_names_the_endpoint_host_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = closed_port()
    env = {
        "REACTBOT_MODEL": "m",
        "OPENAI_BASE_URL": f"http://user:{SECRET}@127.0.0.1:{port}/v1/secret-path?key=k",
        "OPENAI_API_KEY": SECRET,
    }
    out = io.StringIO()
    code = await run_cli(["ask", "hi"], env=env, stdout=out)
    text = out.getvalue() + capsys.readouterr().err
    assert code == 1
    failure = [line for line in text.splitlines() if line.startswith("✗")]
    assert failure == [f"✗ Could not reach the model provider at 127.0.0.1:{port}."], text
    assert SECRET not in text and "secret-path" not in text and "key=k" not in text
    assert "1 step" not in text and "no step completed" in text


async def test_a_model_named_without_key_or_base_url_fails_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    started = asyncio.get_running_loop().time()
    code = await run_cli(["ask", "hi"], env={"REACTBOT_MODEL": "gpt-4o-mini"}, stdout=out)
    took = asyncio.get_running_loop().time() - started
    text = out.getvalue()
    assert code == 1, text
    assert "No API key for the model provider at api.openai.com" in text
    assert "OPENAI_API_KEY" in text and "OPENAI_BASE_URL" in text
    assert "retrying" not in text and "1 step" not in text
    assert took < 3.0  # no retries (they took about 7 s)
    err = capsys.readouterr().err  # and it is said at start, before any question
    assert "REACTBOT_MODEL names 'gpt-4o-mini', but neither OPENAI_API_KEY nor" in err


async def test_a_reply_with_no_usable_format_is_not_shown_as_a_thought() -> None:
    from tests.fakes.openai_server import FakeOpenAI

    async with FakeOpenAI(model="m") as fake:
        for text in ("Just prose, no labels.", "More prose.", "Prose again."):
            fake.reply(text)
        fake.reply("I will compute it.\nAction: calculate[6*7]").reply("Answer: 42")
        env = {"REACTBOT_MODEL": "m", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        out = io.StringIO()
        code = await run_cli(["ask", "hi"], env=env, stdout=out)
        unformatted = out.getvalue()
        out = io.StringIO()
        assert await run_cli(["ask", "6*7?"], env=env, stdout=out) == 0
        labelled_later = out.getvalue()
        fake.assert_complete()
    assert code == 0, unformatted
    assert "Thought:" not in unformatted
    assert "Unformatted reply: Just prose, no labels." in unformatted
    assert "here it is unformatted:\nProse again." in unformatted
    last = unformatted.rstrip().splitlines()[-1]
    assert last.startswith("⚠ unformatted reply ·") and "0 steps" not in unformatted
    # Text before a label that an Action then follows was the thought after all.
    assert "Thought: I will compute it.\nAction: calculate[6*7]" in labelled_later


async def test_tools_lists_what_lookup_searches_with_passage_counts(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# One\n\nfirst\n\n# Two\n\nsecond\n")
    config = tmp_path / "c.yaml"
    config.write_text("tools: {lookup: {paths: [kb]}}\n")
    out = io.StringIO()
    assert await run_cli(["tools", "--config", str(config)], env={}, stdout=out) == 0
    lines = [" ".join(line.split()) for line in out.getvalue().splitlines()]
    assert f"{tmp_path / 'kb'} folder 2 always" in lines
    manual = next(line for line in lines if line.endswith("when the keywords name reactbot"))
    assert manual.split()[1] == "manual" and int(manual.split()[2]) > 20
    demo = io.StringIO()
    assert await run_cli(["tools"], env={}, stdout=demo) == 0
    assert "always (no folder set)" in demo.getvalue()


async def test_a_long_how_to_is_kept_whole_by_trace_show_and_export(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    """Issue 42: `trace show` and `trace export` held the answer cut mid-word and the lookup
    result cut at ~4,100 characters; the whole section is kept now, the answer points to it."""
    import json

    config = config_with_prefix(tmp_path, redis_prefix)
    env = {"REDIS_URL": redis_url}
    argv = ["ask", "--conversation", "howto", "How do I connect you to Telegram?"]
    assert await run_cli([*argv, "--config", config], env=env, stdout=io.StringIO()) == 0
    listed = io.StringIO()
    argv = ["trace", "list", "--conversation", "howto", "--config", config]
    assert await run_cli(argv, env=env, stdout=listed) == 0
    trace_id = listed.getvalue().split()[0]
    shown = io.StringIO()
    argv = ["trace", "show", trace_id, "--config", config]
    assert await run_cli(argv, env=env, stdout=shown) == 0
    manual = (REPO / "bot" / "knowledge" / "telegram.md").read_text()
    last_paragraph = manual.rstrip().rsplit("\n\n", 1)[1]
    assert " ".join(last_paragraph.split()) in " ".join(shown.getvalue().split())
    out = tmp_path / "t.json"
    argv = ["trace", "export", trace_id, str(out), "--config", config]
    assert await run_cli(argv, env=env, stdout=io.StringIO()) == 0
    data = json.loads(out.read_text())
    observation = data["steps"][0]["observation"]
    assert len(observation) > 5000 and last_paragraph in observation
    assert data["answer"].endswith(
        "all of it is in telegram.md › Connect reactbot to Telegram, and this answer's trace "
        "keeps the whole lookup result.)"
    )
