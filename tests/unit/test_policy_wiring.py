"""Every surface is given the same policy values from one config (issue 41: one policy).

A dead process's answers are finished after the run lease: Telegram's mapper once used
``agent.deadline + 60`` (240 s) where every other surface used ``agent.lease_seconds`` (25 s).
Since ``bot.policy.policy_for`` is the only reader of these keys, this reads them from the
environment, as a deployment sets them, on every platform.
"""

from __future__ import annotations

from bot.config import load_config
from bot.policy import PLATFORMS, policy_for

ENV = {
    "TELEGRAM_BOT_TOKEN": "123456:test-token",
    "SLACK_BOT_TOKEN": "xoxb-test",
    "SLACK_APP_TOKEN": "xapp-test",
    "REACTBOT_AGENT__LEASE_SECONDS": "17",
    "REACTBOT_AGENT__MERGE_WINDOW": "0.5",
    "REACTBOT_AGENT__MAX_RUNS_PER_USER": "3",
}


def test_every_surface_gets_the_run_lease_and_the_shared_limits() -> None:
    config = load_config(None, ENV)
    policies = [policy_for(config, platform) for platform in PLATFORMS]
    assert {p.lease for p in policies} == {17.0}
    assert {p.max_runs_per_user for p in policies} == {3}
    assert {p.merge_window for p in policies} == {0.5}
