"""``reactbot serve``: runs the configured platforms until interrupted."""

from __future__ import annotations

from rich.console import Console

from bot.config import Config

HOW_TO_ENABLE = """\
No platform is configured, so there is nothing to serve.
  Discord: set DISCORD_TOKEN (bot token; enable the Message Content intent).
  Slack:   set SLACK_BOT_TOKEN, and SLACK_APP_TOKEN for slack.mode: socket (the default)
           or SLACK_SIGNING_SECRET for slack.mode: http.
To try the bot without a platform: reactbot chat"""


async def serve(config: Config, *, platform: str | None, console: Console) -> int:
    wanted = {
        "discord": config.discord_enabled,
        "slack": config.slack_enabled,
    }
    if platform is not None and not wanted[platform]:
        console.print(HOW_TO_ENABLE, markup=False)
        return 2
    if not any(wanted.values()):
        console.print(HOW_TO_ENABLE, markup=False)
        return 2
    console.print("Platform adapters are not built yet in this version.", markup=False)
    return 2
