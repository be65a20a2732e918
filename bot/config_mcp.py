"""``tools.mcp:`` in the config: the Model Context Protocol servers (``core.tools.mcp``,
docs/mcp.md). Secrets stay in the environment: ``env_from`` and ``headers_from`` name the
variables, and a value that looks like a token is refused where a name belongs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.config_base import TOKEN_LIKE, Section, check_http_url, check_not_blank

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")


ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_variable_name(name: str, where: str) -> str:
    # The value itself is never echoed: it may be a token written here by mistake.
    if TOKEN_LIKE.match(name):
        raise ValueError(
            f"{where} looks like a secret itself; put it in an environment variable and name "
            "that variable here"
        )
    if not ENV_VAR.match(name):
        raise ValueError(
            f"{where} is not an environment variable name (letters, digits and '_'; the value "
            "is read from that variable, never written here)"
        )
    return name


class MCPServerConfig(Section):
    """One Model Context Protocol server: a command run over stdio, or a Streamable HTTP
    ``url``. Secrets stay in the environment (``env_from`` and ``headers_from`` name them)."""

    name: str
    enabled: bool = True
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    env_from: tuple[str, ...] = ()
    url: str | None = None
    headers_from: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    """Allow-list of the server's own tool names; None: every tool it offers."""
    approval: bool | None = None
    """True: every tool of this server needs approval; False: none does; None: each tool's
    annotations decide (not read-only: approval)."""

    _http_url = field_validator("url")(check_http_url)
    _not_blank = field_validator("command")(check_not_blank)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _SERVER_NAME.match(value):
            raise ValueError(
                "must be 1 to 32 letters, digits, '_' or '-', starting with a letter or digit "
                "(it prefixes the server's tool names)"
            )
        return value

    @field_validator("env_from")
    @classmethod
    def _variable_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for index, name in enumerate(names):
            check_variable_name(name, f"item {index}")
        return names

    @field_validator("headers_from")
    @classmethod
    def _header_variables(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, variable in headers.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            check_variable_name(variable, header)
        return headers

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a server run over stdio) or url (Streamable HTTP), "
                "not both and not neither"
            )
        if self.url is not None:
            stdio_only = [k for k in ("args", "cwd", "env_from") if k in self.model_fields_set]
            if stdio_only:
                raise ValueError(f"{', '.join(stdio_only)} apply to a command, not to a url")
        if self.command is not None and self.headers_from:
            raise ValueError("headers_from applies to a url, not to a command")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment variables this server reads: ``env_from`` and ``headers_from``."""
        return (*self.env_from, *self.headers_from.values())


class MCPConfig(Section):
    servers: tuple[MCPServerConfig, ...] = ()
    timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds per tool call (and per connect and listing) before it is cancelled."""

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: tuple[MCPServerConfig, ...]) -> tuple[MCPServerConfig, ...]:
        seen: set[str] = set()
        for server in servers:
            if server.name.lower() in seen:
                raise ValueError(f"two servers are named {server.name!r}; names must differ")
            seen.add(server.name.lower())
        return servers

    @property
    def enabled(self) -> tuple[MCPServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)
