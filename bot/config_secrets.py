"""Secrets are never read from the config file: a key that looks like one (``api_key``,
``token``, ``signing_secret``...) is refused with the environment variable to set instead."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from bot.config_base import ConfigError, format_loc

# Secrets: ``Secrets`` field -> environment variable. They are never read from the file.
SECRET_ENV_VARS: Mapping[str, str] = {
    "openai_api_key": "OPENAI_API_KEY",
    "tavily_api_key": "TAVILY_API_KEY",
    "discord_token": "DISCORD_TOKEN",
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_app_token": "SLACK_APP_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "link_secret": "REACTBOT_LINK_SECRET",
    "web_token": "REACTBOT_WEB_TOKEN",
    "telegram_bot_token": "TELEGRAM_BOT_TOKEN",
}


SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|token|secret|secrets|signing[_-]secret|password|passwd)$", re.I
)


_SECRET_KEY_ENV: Mapping[str, str] = {
    "model.api_key": "OPENAI_API_KEY",
    "model.openai_api_key": "OPENAI_API_KEY",
    "tools.search.api_key": "TAVILY_API_KEY",
    "tools.search.tavily_api_key": "TAVILY_API_KEY",
    "discord.token": "DISCORD_TOKEN",
    "discord.bot_token": "DISCORD_TOKEN",
    "slack.bot_token": "SLACK_BOT_TOKEN",
    "slack.token": "SLACK_BOT_TOKEN",
    "slack.app_token": "SLACK_APP_TOKEN",
    "slack.signing_secret": "SLACK_SIGNING_SECRET",
    "web.link_secret": "REACTBOT_LINK_SECRET",
    "web.secret": "REACTBOT_LINK_SECRET",
    "web.token": "REACTBOT_WEB_TOKEN",
    "web.web_token": "REACTBOT_WEB_TOKEN",
    "telegram.token": "TELEGRAM_BOT_TOKEN",
    "telegram.bot_token": "TELEGRAM_BOT_TOKEN",
}


def refuse_secret_keys(data: Mapping[Any, Any]) -> None:
    problems = [
        f"{format_loc(key_path)}: secrets are not read from the config file; remove the key "
        f"and {secret_fix(key_path)}"
        for key_path in secret_key_paths(data, ())
    ]
    if problems:
        raise ConfigError(problems)


def secret_fix(key_path: tuple[int | str, ...]) -> str:
    dotted = format_loc(key_path)
    var = _SECRET_KEY_ENV.get(dotted) or SECRET_ENV_VARS.get(str(key_path[-1]).lower())
    if var:
        return f"set the {var} environment variable instead"
    if dotted.startswith("tools.mcp.servers["):
        return (
            "put it in an environment variable and name that variable in env_from "
            "(a command) or headers_from (a url)"
        )
    return f"use the environment variables instead ({', '.join(SECRET_ENV_VARS.values())})"


# Mappings whose keys are names, not settings: ``headers_from: {X-Api-Key: MY_KEY}`` names
# the variable holding the key, which is exactly how a secret should be configured.
_NAME_MAPPINGS = frozenset({"headers_from"})


def secret_key_paths(
    node: object, prefix: tuple[int | str, ...]
) -> Iterator[tuple[int | str, ...]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = (*prefix, str(key))
            if SECRET_KEY.search(str(key)):
                yield path
            elif str(key) not in _NAME_MAPPINGS:
                yield from secret_key_paths(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from secret_key_paths(item, (*prefix, index))
