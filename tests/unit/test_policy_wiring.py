"""Every surface is given the same policy values from one config (issue 41: one policy).

A dead process's answers are finished after the run lease: Telegram's mapper once used
``agent.deadline + 60`` (240 s) where every other surface used ``agent.lease_seconds`` (25 s).
"""

from __future__ import annotations

from bot.config import load_config
from bot.serve_slack import slack_settings
from bot.serve_telegram import telegram_settings
from bot.serve_web import web_settings

ENV = {
    "TELEGRAM_BOT_TOKEN": "123456:test-token",
    "SLACK_BOT_TOKEN": "xoxb-test",
    "SLACK_APP_TOKEN": "xapp-test",
    "REACTBOT_AGENT__LEASE_SECONDS": "17",
}


def test_every_surface_gets_the_run_lease_and_the_shared_limits() -> None:
    config = load_config(None, ENV)
    settings = [telegram_settings(config), slack_settings(config), web_settings(config)]
    assert {s.run_lease for s in settings} == {17.0}
    assert {s.max_runs_per_user for s in settings} == {config.agent.max_runs_per_user}
    assert {s.merge_window for s in settings} == {config.agent.merge_window}
