"""What the commands that run beside the app need of it (``Host``), so that they and the
platform registry type against this protocol instead of importing ``bot.app``, which imports
them (an import cycle is two modules that must change together). ``bot.app.App`` is the
one implementation; mypy checks it against this protocol where it is passed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.config import Config
    from core.agent import Agent
    from core.llm import ChatModel
    from core.stores import Stores
    from core.stores.resilient import StoreHealth
    from core.tools import ToolRegistry

__all__ = ["Host"]


class Host(Protocol):
    """The app as ``reactbot trace`` and the platforms' ``serve`` functions use it."""

    config: Config
    agent: Agent
    model: ChatModel
    tools: ToolRegistry
    stores: Stores
    notes: list[str]
    catalogue: dict[str, ChatModel]

    @property
    def health(self) -> StoreHealth | None: ...

    async def start(self) -> None: ...
