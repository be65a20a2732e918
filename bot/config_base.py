"""What every part of ``bot.config`` shares: ``Section`` (a config section: unknown keys
refused, frozen, URLs with credentials never shown), ``ConfigError``, the ``REACTBOT_*``
variable naming, and the small checks and redactions the sections and the error messages
use. Split from ``bot/config.py`` so that file stays readable; ``bot.config`` re-exports
what others import."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from core.errors import ReactbotError

CONFIG_PATH_ENV = "REACTBOT_CONFIG"
"""The variable naming the config file when ``--config`` is not given."""


# Any key from the environment: ``REACTBOT_`` and the key path in capitals, its levels joined
# by ``__`` (``REACTBOT_TOOLS__SEARCH__MAX_RESULTS``); a top-level key that is not a section
# has no ``__`` (``REACTBOT_LOG_LEVEL``). The value is JSON when it parses (true, 5, ["a"]),
# else the text itself. They are applied after ``ENV_OVERRIDES``, so they win over them too.
ENV_KEY_PREFIX = "REACTBOT_"


ENV_KEY_SEPARATOR = "__"


def env_key_variable(path: Sequence[str]) -> str:
    """The variable that sets a key: ``("web", "enabled")`` -> ``REACTBOT_WEB__ENABLED``."""
    return ENV_KEY_PREFIX + ENV_KEY_SEPARATOR.join(part.upper() for part in path)


class ConfigError(ReactbotError):
    """The configuration cannot be used: one line per problem, each starting with
    ``config error:``, saying which key and how to fix it. Never contains a secret."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("\n".join(f"config error: {p}" for p in self.problems))


TOKEN_LIKE = re.compile(r"^(sk-|xox[a-z]-|xapp-|tvly-|gh[pousr]_|github_pat_|Bearer\s)", re.I)


_URL_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@\s]*@", re.I)


def redact_url(text: str) -> str:
    return _URL_USERINFO.sub(r"\1***@", text)


def check_http_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value


def check_not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty (remove the key to leave it unset)")
    return value


class Section(BaseModel):
    # Start-up (bench/startup.py): a section's validator is built when something is first
    # validated, not at import; with no file and no REACTBOT_* key nothing is (load_config).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # URLs may carry credentials (redis://:password@host): never show them.
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _redacted_dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Dumps are for display and logs too; SecretStr fields already dump as stars.
        data = handler(self)
        if not isinstance(data, dict):
            return data
        return {k: redact_url(v) if isinstance(v, str) else v for k, v in data.items()}


_S = typing.TypeVar("_S", bound=Section)


def defaults(section: type[_S]) -> typing.Callable[[], _S]:
    """The default of a section-valued key: the section with each key at its default, built
    without validating it (``model_construct``), which is what validating no keys gives (every
    section's validators accept its defaults, tests/unit/test_config.py checks it) without
    building the section's validator."""
    return section.model_construct


def format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def kind_of(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    return type(value).__name__


NOT_FROM_FILE = frozenset({"secrets"})
"""Top-level keys of the config that are never read from the file (or a ``REACTBOT_*`` key)."""
