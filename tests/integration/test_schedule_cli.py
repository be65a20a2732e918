"""``reactbot schedule add|list|pause|resume|delete|run`` on a real Redis, through the command
line as an operator types it."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from bot.cli import run_cli


class Operator:
    def __init__(self, redis_url: str, prefix: str, config: Path) -> None:
        self.env = {"REDIS_URL": redis_url, "REACTBOT_REDIS__PREFIX": prefix}
        self.config = config

    async def __call__(
        self, capsys: pytest.CaptureFixture[str], *args: str
    ) -> tuple[int, str, str]:
        out = io.StringIO()
        code = await run_cli(
            ["--config", str(self.config), "schedule", *args], env=self.env, stdout=out
        )
        return code, out.getvalue(), capsys.readouterr().err


@pytest.fixture
def operator(redis_url: str, redis_prefix: str, tmp_path: Path) -> Operator:
    config = tmp_path / "c.yaml"
    config.write_text("schedule:\n  default_timezone: Europe/Paris\n")
    return Operator(redis_url, redis_prefix, config)


async def test_add_list_pause_resume_run_delete(
    operator: Operator, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await operator(
        capsys,
        "add",
        "every monday 09:00",
        "What changed in the releases channel?",
        "--platform",
        "slack",
        "--channel",
        "C0RELEASES",
    )
    assert code == 0, out
    found = re.search(
        r"Scheduled ([0-9a-f]{8}): every monday 09:00 Europe/Paris\. Next runs: (.*)\.", out
    )
    assert found, out
    sid, runs = found.groups()
    assert runs.count("Mon ") == 3 and runs.endswith("(Europe/Paris)")

    code, out, _ = await operator(capsys, "list", "--platform", "slack")
    assert code == 0 and sid in out and "active" in out and "slack C0RELEASES" in out
    assert "by operator" in out and "What changed in the releases channel?" in out
    code, out, _ = await operator(capsys, "list", "--platform", "telegram")
    assert out.strip() == "No schedules."

    code, out, _ = await operator(capsys, "pause", sid)
    assert (code, out.strip()) == (0, f"⏸️ Paused {sid}.")
    code, out, _ = await operator(capsys, "list")
    assert "paused" in out and "no next run" in out
    code, out, _ = await operator(capsys, "resume", sid)
    assert code == 0 and out.startswith(f"▶️ Resumed {sid}. Next run: Mon ")
    code, out, _ = await operator(capsys, "run", sid)
    assert (code, out.strip()) == (0, f"▶️ {sid} will run in a few seconds.")
    code, out, _ = await operator(capsys, "delete", sid)
    assert (code, out.strip()) == (0, f"🗑️ Deleted {sid}.")
    code, _, err = await operator(capsys, "delete", sid)
    assert code == 1 and f"No schedule {sid} here" in err


async def test_refusals_are_one_line_each(
    operator: Operator, capsys: pytest.CaptureFixture[str]
) -> None:
    place = ["--platform", "telegram", "--channel", "42"]
    code, _, err = await operator(capsys, "add", "*/2 * * * *", "ping?", *place)
    assert (code, err.strip()) == (1, "Runs must be at least 5 minutes apart.")
    code, _, err = await operator(capsys, "add", "every fortnight", "ping?", *place)
    assert code == 1 and err.strip().startswith("Write a number and minutes")
    code, _, err = await operator(capsys, "add", "in 10 minutes", "x" * 5000, *place)
    assert code == 1 and "at most 4,000 characters" in err
    code, out, _ = await operator(capsys, "list")
    assert out.strip() == "No schedules."


async def test_without_redis_the_command_says_it_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    code = await run_cli(["schedule", "list"], env={}, stdout=out)
    assert code == 1
    assert "Schedules need Redis (REDIS_URL)" in capsys.readouterr().err


async def test_schedule_alone_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert await run_cli(["schedule"], env={}, stdout=out) == 0
    assert "add" in out.getvalue() and "every 2 hours" in out.getvalue()
