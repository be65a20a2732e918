"""``files.*`` wired by the app: the Redis store with the history's TTL, the limits, the
switch, and both platforms' downloaders."""

from __future__ import annotations

from pathlib import Path

from adapters.downloads import DISCORD_FILE_HOSTS, SLACK_FILE_HOSTS
from bot.app import App
from bot.config import load_config
from bot.serve_discord import discord_files
from bot.serve_slack import slack_files, slack_settings
from core.files import passages_of
from core.stores.redis import RedisFileStore
from core.stores.resilient import CheckedFileStore


async def test_files_config_reaches_the_store_and_the_downloaders(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"redis:\n  prefix: '{redis_prefix}'\n  history_ttl_days: 2\n"
        "files:\n  max_bytes: 1000\n  max_per_question: 2\n"
        "  max_chars_per_conversation: 777\n  allowed_types: [pdf, text]\n"
        "discord:\n  api_base_url: http://127.0.0.1:9/api/v10\n"
        "slack:\n  api_base_url: http://127.0.0.1:8/api/\n"
    )
    env = {"REDIS_URL": redis_url, "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    app = App.create(load_config(path, env))
    try:
        assert isinstance(app.stores.files, CheckedFileStore)  # Redis, through the stores' health
        assert isinstance(app.stores.files.inner, RedisFileStore)
        await app.stores.files.add("c", passages_of("a.txt", [(None, "hello")]))
        assert app.redis_client is not None
        assert 2 * 86400 - 10 < await app.redis_client.ttl(f"{redis_prefix}files:c") <= 2 * 86400
        discord = discord_files(app)
        assert discord is not None
        assert discord.limits.max_per_question == 2
        assert discord.limits.max_chars_per_conversation == 777
        assert discord.limits.allowed_types == frozenset({"pdf", "text"})
        assert discord.downloader.max_bytes == 1000 and discord.downloader.token is None
        assert discord.downloader.hosts == DISCORD_FILE_HOSTS
        assert discord.downloader.allowed("http://127.0.0.1:9/attachments/1/2/a.txt")
        slack = slack_files(app, slack_settings(app.config))
        assert slack is not None and slack.downloader.token == "xoxb-1"
        assert slack.downloader.token_hosts == SLACK_FILE_HOSTS
        assert slack.downloader.allowed("http://127.0.0.1:8/files-pri/T-F/a.txt")
        assert not slack.downloader.allowed("http://127.0.0.1:9/files-pri/T-F/a.txt")
    finally:
        await app.aclose()


async def test_files_can_be_switched_off(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("files:\n  enabled: false\n")
    app = App.create(load_config(path, {}))
    try:
        assert discord_files(app) is None
    finally:
        await app.aclose()
