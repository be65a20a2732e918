"""``reactbot serve``: runs the configured platforms until interrupted."""

from __future__ import annotations

import asyncio

from rich.console import Console

from bot.app import App
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
    chosen = [name for name, on in wanted.items() if on and platform in (None, name)]
    app = App.create(config)
    try:
        for note in app.notes:
            console.print(f"note: {note}", style="dim", markup=False)
        async with asyncio.TaskGroup() as group:
            for name in chosen:
                group.create_task(_RUNNERS[name](app), name=f"serve-{name}")
    finally:
        await app.aclose()
    return 0


async def _serve_discord(app: App) -> None:
    from bot.serve_discord import serve_discord

    await serve_discord(app)


async def _serve_slack(app: App) -> None:
    from bot.serve_slack import serve_slack

    await serve_slack(app)


_RUNNERS = {"discord": _serve_discord, "slack": _serve_slack}
