"""``reactbot eval`` end to end: the demo cases offline, two modes side by side on the local
fake OpenAI server (real HTTP, real ``openai`` client) with a price, the files, a regression
against a baseline, the exit codes, and Ctrl-C."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from bench.eval_fake import PRICE, script
from bot.cli import run_cli
from tests.fakes.openai_server import FakeOpenAI, FakeUsage

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "evals" / "demo.jsonl")
DEMO_TEXT = Path(DEMO).read_text(encoding="utf-8")


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(list(args), env=env or {}, stdout=out)
    return code, out.getvalue()


async def test_the_demo_cases_pass_offline_on_the_demo_model(tmp_path: Path) -> None:
    code, out = await cli("eval", DEMO, "--out", str(tmp_path))
    assert code == 0, out
    assert "offline demo model text 100.0% 0 / 0 2.0" in " ".join(out.split())
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["runs"]) == 8 and all(r["verdict"] == "pass" for r in data["runs"])
    assert all(r["trace_id"] for r in data["runs"])


async def test_two_modes_on_the_fake_server_with_cost_table_and_files(tmp_path: Path) -> None:
    config = tmp_path / "reactbot.yaml"
    config.write_text("model:\n  price: " + json.dumps(PRICE) + "\n")
    async with FakeOpenAI(model="fake-small") as fake:
        script(fake, "text")
        script(fake, "tools")
        env = {
            "REACTBOT_MODEL": "fake-small",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-x",
        }
        code, out = await cli(
            "--config",
            str(config),
            "eval",
            DEMO,
            "--mode",
            "text",
            "--mode",
            "tools",
            "--concurrency",
            "1",
            "--out",
            str(tmp_path / "out"),
            env=env,
        )
        fake.assert_complete()
    assert code == 0, out
    lines = out.splitlines()
    assert "model       mode   accuracy  format errors  steps  tokens in/out     cost" in lines[0]
    assert lines[1].startswith(
        "fake-small  text      87.5%          0 / 1    2.0     11,070/588  $0.0017"
    )
    assert lines[2].startswith(
        "fake-small  tools    100.0%          0 / 0    2.0     10,480/576  $0.0016"
    )
    assert (
        'failed: fake-small/text "division" answered "22/7 is about 3.14" (want 3.142857 ± 0.001)'
        in out
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (division,) = [r for r in data["runs"] if r["case"] == "division" and r["mode"] == "text"]
    assert division["verdict"] == "fail" and division["tokens_in"] == 1310
    # 610 prompt tokens (512 cached) and 42 out, then 700 and 30: priced per million
    want = (98 * 0.15 + 512 * 0.075 + 42 * 0.60 + 700 * 0.15 + 30 * 0.60) / 1e6
    assert division["cost_usd"] == pytest.approx(want)
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;' in html
    assert "<script" not in html and "22/7 is about 3.14" in html


async def test_a_case_that_passed_in_the_baseline_and_fails_now_exits_1(tmp_path: Path) -> None:
    code, _ = await cli("eval", DEMO, "--out", str(tmp_path / "before"))
    assert code == 0
    changed = tmp_path / "changed.jsonl"
    changed.write_text(DEMO_TEXT.replace('"number": 42}', '"number": 43}'))
    baseline = str(tmp_path / "before" / "results.json")
    code, out = await cli("eval", str(changed))
    assert code == 0, out  # a failure alone does not fail the command
    code, out = await cli("eval", str(changed), "--baseline", baseline)
    assert code == 1
    assert (
        'regression: "mul" passed in the baseline and fails now on offline demo model/text' in out
    )
    code, out = await cli("eval", DEMO, "--baseline", baseline)
    assert code == 0 and "regression" not in out


@pytest.mark.parametrize(("minimum", "code"), [("0.9", 1), ("87.5%", 0), ("50%", 0)])
async def test_min_accuracy_gates_the_exit_code(tmp_path: Path, minimum: str, code: int) -> None:
    changed = tmp_path / "changed.jsonl"
    changed.write_text(DEMO_TEXT.replace('"number": 42}', '"number": 43}'))
    got, out = await cli("eval", str(changed), "--min-accuracy", minimum)
    assert got == code, out


async def test_a_bad_case_file_or_option_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "expect": {"number": 1}}\n{"question": "q", "expect": {}}\n')
    assert (await cli("eval", str(bad)))[0] == 2
    assert "bad.jsonl: line 2: expect: needs exactly one of" in capsys.readouterr().err
    assert (await cli("eval", DEMO, "--min-accuracy", "lots"))[0] == 2
    assert "--min-accuracy lots: not a number" in capsys.readouterr().err
    tools = tmp_path / "tools.jsonl"
    tools.write_text('{"question": "q", "expect": {"number": 1}, "tools": ["teleport"]}\n')
    assert (await cli("eval", str(tools)))[0] == 2
    assert "line 1: tools: 'teleport' is not a configured tool" in capsys.readouterr().err


async def test_ctrl_c_stops_cleanly_and_writes_what_finished(tmp_path: Path) -> None:
    cases = tmp_path / "two.jsonl"
    cases.write_text(
        '{"id": "one", "question": "What is 6*7?", "expect": {"number": 42}}\n'
        '{"id": "two", "question": "What is 6*8?", "expect": {"number": 48}}\n'
    )
    async with FakeOpenAI(model="m") as fake:
        fake.reply("Thought: easy.\nAction: finish[42]", usage=FakeUsage(10, 5))
        fake.reply("Thought: I am", stall_after=1)  # the second run hangs until Ctrl-C
        env = {
            **os.environ,
            "REACTBOT_MODEL": "m",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-x",
        }
        env.pop("REACTBOT_CONFIG", None)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "eval",
            str(cases),
            "--concurrency",
            "1",
            "--out",
            str(tmp_path / "out"),
            env=env,
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(600):  # until the fake has the second request (its own record)
            if len(fake.requests) >= 2:
                break
            await asyncio.sleep(0.05)
        assert len(fake.requests) == 2
        proc.send_signal(signal.SIGINT)
        _, err = await proc.communicate()
    assert proc.returncode == 130, err.decode()
    assert "Stopped by Ctrl-C: 1 of 2 runs finished" in err.decode()
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["interrupted"] is True
    assert [r["case"] for r in data["runs"]] == ["one"]


async def test_a_model_outside_the_catalogue_shows_tokens_and_no_borrowed_price(
    tmp_path: Path,
) -> None:
    """``--model NAME`` not in the catalogue runs on the configured endpoint: neither the
    configured model's price nor a catalogue entry's price (another endpoint serving a model
    of that name) is its price."""
    config = tmp_path / "reactbot.yaml"
    config.write_text(
        "model:\n  price: " + json.dumps(PRICE) + "\n"
        "models:\n"
        "  big:\n"
        "    name: fake-big\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        "    price: {input: 100, output: 100}\n"
    )
    cases = tmp_path / "one.jsonl"
    cases.write_text('{"id": "one", "question": "What is 6*7?", "expect": {"number": 42}}\n')
    async with FakeOpenAI(model="fake-small") as fake:
        for _ in range(3):
            fake.reply("Thought: easy.\nAction: finish[42]", usage=FakeUsage(1000, 50))
        env = {
            "REACTBOT_MODEL": "fake-small",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-x",
        }
        code, out = await cli(
            "--config", str(config), "eval", str(cases), "--model", "fake-other",
            "--model", "fake-big", "--model", "fake-small", "--concurrency", "1",
            "--out", str(tmp_path / "out"), env=env,
        )  # fmt: skip
        fake.assert_complete()
    assert code == 0, out
    rows = {line.split()[0]: line for line in out.splitlines()[1:4]}
    assert rows["fake-other"].split()[7:9] == ["1,000/50", "—"], out
    assert rows["fake-big"].split()[7:9] == ["1,000/50", "—"], out
    assert "$0.00018" in rows["fake-small"], out  # the configured model keeps its own price
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    costs = {r["model"]: r["cost_usd"] for r in data["runs"]}
    assert costs["fake-other"] is None and costs["fake-big"] is None
    assert costs["fake-small"] == pytest.approx((1000 * 0.15 + 50 * 0.60) / 1e6)
