"""Logging set-up: one handler on stderr, and a filter that blanks secrets in every record.

``log_format: json`` writes one JSON object per line. A run's lines carry its ``run_id``,
``conversation`` and ``platform``: ``RunLogContext``, one of the agent's run observers, puts
them in a context variable when the run starts, in the context of the code that starts it,
so the run's own task (created right after, with a copy of that context) and the adapter code
following the run both see them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit

from bot.config import Config
from bot.platforms import BY_NAME
from core.trace import Trace

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


@dataclass(frozen=True, slots=True)
class RunFields:
    run_id: str
    conversation: str
    platform: str


RUN_FIELDS: ContextVar[RunFields | None] = ContextVar("reactbot_run_fields", default=None)
"""The run whose code is logging, if any."""


def platform_of(conversation: str) -> str:
    """The served platform named by the conversation's prefix (``discord:…``); anything
    else: ``terminal``."""
    head = conversation.split(":", 1)[0]
    return head if head in BY_NAME else "terminal"


class _NoProbe:
    """Nothing to watch inside the run: the fields are set when it starts."""

    def model_call(self, step: int, model: str, request: object) -> _NoProbe:
        return self

    def tool_call(self, step: int, call_id: str | None, *args: str) -> _NoProbe:
        return self

    def first_chunk(self) -> None:
        pass

    def response(self, id: str, model: str) -> None:
        pass

    def chunk(self, usage: object, finish: str | None) -> None:
        pass

    def end(self, *args: object) -> None:
        pass


class RunLogContext:
    """A run observer that names the run in every log line made in its context."""

    def start(self, trace: Trace) -> _NoProbe:
        conversation = trace.conversation
        RUN_FIELDS.set(RunFields(trace.id, conversation, platform_of(conversation)))
        return _NoProbe()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in the text are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = RUN_FIELDS.get()
        if fields is not None:
            entry["run_id"] = fields.run_id
            entry["conversation"] = fields.conversation
            entry["platform"] = fields.platform
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        line = json.dumps(entry, ensure_ascii=False, default=str)
        # JSON leaves these unescaped, yet many readers take them for line breaks
        return line.translate(_LINE_BREAKS)


_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def setup_logging(config: Config, *, verbose: bool = False, quiet: bool = False) -> None:
    """``quiet`` (terminal commands) logs warnings only, unless ``verbose``."""
    configured: int = logging.getLevelNamesMapping()[config.log_level]
    level = logging.INFO if verbose else (logging.WARNING if quiet else configured)
    handler = logging.StreamHandler()
    if config.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
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
