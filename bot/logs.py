"""Logging set-up: one handler on stderr, and a filter that blanks secrets in every record."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from bot.config import Config

REDACTED = "***"


class RedactSecrets(logging.Filter):
    """Replaces any configured secret value in a record's final message (and args)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = self.redact(record.getMessage())
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.redact(record.exc_text)
            record.msg, record.args = message, None
        return True


def secret_values(config: Config) -> list[str]:
    """The env secrets, plus passwords written into endpoint URLs (``redis://:pw@host``)."""
    values = config.secrets.values()
    for url in (config.redis.url, config.model.base_url):
        password = urlsplit(url).password if url else None
        if password:
            values.append(unquote(password))
            values.append(password)
    return values


def setup_logging(config: Config, *, verbose: bool = False, quiet: bool = False) -> None:
    """``quiet`` (terminal commands) logs warnings only, unless ``verbose``."""
    configured: int = logging.getLevelNamesMapping()[config.log_level]
    level = logging.INFO if verbose else (logging.WARNING if quiet else configured)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secret_values(config)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "openai", "discord.gateway", "discord.http"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # The bot never joins voice channels; discord.py warns at every start that voice is off.
    logging.getLogger("discord.client").addFilter(
        lambda record: "voice will NOT be supported" not in record.getMessage()
    )
