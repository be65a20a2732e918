"""``log_format: json``: one JSON object per line; a run's lines carry its run id, conversation
and platform; secrets are blanked as in the text format."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from bot.app import App
from bot.config import Config, Secrets
from bot.logs import REDACTED, JsonFormatter, RedactSecrets, RunLogContext, setup_logging
from core.agent import Agent
from core.events import Finished
from core.scripted import ScriptedModel
from core.tools import FunctionTool, ToolRegistry

SECRET = "sk-live-secret-0123456789"
log = logging.getLogger("tests.json_logs")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def json_config() -> Config:
    return Config(log_format="json", secrets=Secrets(openai_api_key=SecretStr(SECRET)))


def lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


async def leaky(arg: str) -> str:
    log.warning("the tool saw %s with key %s", arg, SECRET)
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        log.exception("and it failed")
    return "42"


def agent() -> Agent:
    tools = ToolRegistry()
    tools.add(FunctionTool("leaky", leaky, description="logs", example="leaky[x]"))
    model = ScriptedModel(
        ["Thought: use it.\nAction: leaky[x]", "Thought: ok.\nAction: finish[42]"]
    )
    return Agent(model, tools, observers=[RunLogContext()])


@pytest.mark.usefixtures("restore_logging")
async def test_a_runs_lines_carry_its_id_conversation_and_platform(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(json_config())
    log.warning("before any run")
    run = agent().start("What is it?", conversation="slack:C1:1700000000.000100")
    log.warning("the adapter, following the run")
    events = [event async for event in run.events()]
    assert isinstance(events[-1], Finished)

    records = lines(capsys.readouterr().err)
    assert [r["message"] for r in records] == [
        "before any run",
        "the adapter, following the run",
        f"the tool saw x with key {REDACTED}",
        "and it failed",
    ]
    assert "run_id" not in records[0]
    for record in records[1:]:
        assert record["run_id"] == run.trace.id
        assert record["conversation"] == "slack:C1:1700000000.000100"
        assert record["platform"] == "slack"
    assert records[2]["level"] == "WARNING" and records[2]["logger"] == "tests.json_logs"
    exception = str(records[3]["exception"])
    assert "RuntimeError: failed with" in exception and SECRET not in exception


@pytest.mark.usefixtures("restore_logging")
async def test_two_runs_at_once_keep_their_own_ids(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(json_config())
    runs = [
        agent().start("a?", conversation="discord:1:2"),
        agent().start("b?", conversation="terminal"),
    ]
    for run in runs:
        assert isinstance([e async for e in run.events()][-1], Finished)
    tool_lines = [r for r in lines(capsys.readouterr().err) if r["message"] != "and it failed"]
    by_run = {str(r["run_id"]): r["platform"] for r in tool_lines}
    assert by_run == {runs[0].trace.id: "discord", runs[1].trace.id: "terminal"}


def test_the_app_names_runs_in_log_lines_only_for_json() -> None:
    def watching(config: Config) -> bool:
        return any(isinstance(o, RunLogContext) for o in App.create(config).agent.observers)

    assert watching(Config(log_format="json"))
    assert not watching(Config())


@pytest.mark.usefixtures("restore_logging")
def test_text_format_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(Config(secrets=Secrets(openai_api_key=SecretStr(SECRET))))
    log.warning("key %s", SECRET)
    err = capsys.readouterr().err
    assert err.rstrip().endswith(f"WARNING tests.json_logs: key {REDACTED}")
    assert not err.startswith("{")


@given(
    message=st.text(max_size=2000)
    | st.sampled_from(["a\u2028b", "\x85", "\r\n", '"}{'])
    | st.builds(lambda s: s + SECRET + s, st.text(max_size=20)),
    name=st.text(min_size=1, max_size=50),
)
def test_any_text_is_one_line_of_json_that_reads_back(message: str, name: str) -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord(name, logging.INFO, __file__, 1, "%s", (message,), None)
    redact = RedactSecrets([SECRET])
    redact.filter(record)
    line = formatter.format(record)
    assert line.splitlines() == [line]
    entry = json.loads(line)
    assert entry["message"] == redact.redact(message)
    assert entry["logger"] == name
    assert SECRET not in line
