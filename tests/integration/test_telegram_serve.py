"""``reactbot serve --platform telegram`` as a person starts it, against the strict fake:
the token from the environment, ``telegram.api_base_url`` pointing at the fake, a question
in a private chat answered by the offline demo model, SIGTERM ending it cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from bot.cli import run_cli
from tests.fakes.telegram_server import FakeTelegram
from tests.integration.test_telegram_bot import ended

CHAT = 777


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


async def test_serve_telegram_answers_a_private_question_and_stops_on_sigterm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeTelegram() as fake:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"telegram:\n  api_base_url: {fake.base_url}\n  cooldown_seconds: 0\n"
            "ops:\n  enabled: false\n"
        )
        serving = asyncio.create_task(
            run_cli(
                ["--config", str(config), "serve", "--platform", "telegram"],
                env={"TELEGRAM_BOT_TOKEN": fake.token},
            )
        )
        question = fake.user_says(CHAT, "What is 17*23+4?")

        def answered() -> bool:
            return any(
                m.reply_to == question.id and ended(m) and "395" in m.text
                for m in fake.bot_messages(CHAT)
            )

        await fake.wait_for(answered, within=30.0, what="the demo model's answer")
        assert fake.refused() == []
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await serving
    assert code == 0
    assert "Stopped (SIGTERM)." in capsys.readouterr().err


async def test_without_its_token_telegram_is_not_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("ops:\n  enabled: false\n")
    async with asyncio.timeout(20):
        code = await run_cli(["--config", str(config), "serve", "--platform", "telegram"], env={})
    assert code == 2
    assert "TELEGRAM_BOT_TOKEN" in capsys.readouterr().err
