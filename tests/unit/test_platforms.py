"""The platform registry: one list that serve, the CLI and the logs read."""

from __future__ import annotations

import subprocess
import sys

from bot.config import load_config
from bot.platforms import PLATFORMS, enabled, platform
from bot.serve import how_to_enable, not_configured


def test_every_platform_is_named_once_and_says_how_to_enable_it() -> None:
    names = [p.name for p in PLATFORMS]
    assert names == ["discord", "slack", "web"] and len(set(names)) == len(names)
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
        "print(sorted(m for m in ('discord', 'slack_bolt') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
