"""The platform registry: one list that serve, the CLI and the logs read."""

from __future__ import annotations

import subprocess
import sys

from bot.config import load_config
from bot.platforms import PLATFORMS, enabled, platform
from bot.serve import how_to_enable, not_configured


def test_every_platform_is_named_once_and_says_how_to_enable_it() -> None:
    names = [p.name for p in PLATFORMS]
    assert names == ["discord", "slack", "web", "telegram"] and len(set(names)) == len(names)
    text = how_to_enable()
    assert all(f"  {p.title}:" in text for p in PLATFORMS)


def test_what_a_platform_still_needs_comes_from_its_entry() -> None:
    config = load_config(None, {"SLACK_BOT_TOKEN": "xoxb-1"})
    assert enabled(config) == []
    assert platform("slack").missing(config) == [
        "SLACK_APP_TOKEN (the xapp- app-level token, for Socket Mode)"
    ]
    assert not_configured(config, None) == (
        "Slack is not configured yet: set SLACK_APP_TOKEN (the xapp- app-level token, "
        "for Socket Mode)."
    )
    both = load_config(
        None, {"DISCORD_TOKEN": "d", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    )
    assert [p.name for p in enabled(both)] == ["discord", "slack"]
    assert not_configured(both, "discord") is None


def test_the_registry_loads_no_platform_sdk_until_a_platform_is_served() -> None:
    code = (
        "import sys, bot.serve, bot.cli, bot.platforms\n"
        "print(sorted(m for m in ('discord', 'slack_bolt', 'telegram') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_telegram_needs_its_token_from_the_environment() -> None:
    assert platform("telegram").missing(load_config(None, {})) == [
        "TELEGRAM_BOT_TOKEN (BotFather's token)"
    ]
    config = load_config(None, {"TELEGRAM_BOT_TOKEN": "1:abc"})
    assert [p.name for p in enabled(config)] == ["telegram"]
    assert not_configured(config, "telegram") is None


def test_a_signing_secret_without_an_app_token_points_at_http_mode() -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s3cret"}
    config = load_config(None, env)
    assert not_configured(config, None) == (
        "Slack is not configured yet: set SLACK_APP_TOKEN (the xapp- app-level token, "
        "for Socket Mode).\n"
        "  Or set slack.mode: http (REACTBOT_SLACK__MODE=http), which uses the "
        "SLACK_SIGNING_SECRET already set (Slack then sends events to slack.port)."
    )
    asked = not_configured(config, "slack")
    assert asked is not None and asked.splitlines()[1].startswith("  Or set slack.mode: http")
    # and it is true: in http mode the same environment serves Slack
    http = load_config(None, {**env, "REACTBOT_SLACK__MODE": "http"})
    assert not_configured(http, None) is None


def test_an_app_token_without_a_signing_secret_in_http_mode_points_at_socket_mode() -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "REACTBOT_SLACK__MODE": "http"}
    message = not_configured(load_config(None, env), None)
    assert message is not None
    assert message.splitlines() == [
        "Slack is not configured yet: set SLACK_SIGNING_SECRET (for slack.mode: http).",
        "  Or set slack.mode: socket (REACTBOT_SLACK__MODE=socket), which uses the "
        "SLACK_APP_TOKEN already set.",
    ]


def test_nothing_else_is_suggested_when_no_other_secret_is_set() -> None:
    message = not_configured(load_config(None, {"SLACK_BOT_TOKEN": "xoxb-1"}), "slack")
    assert message is not None and "Or set" not in message
