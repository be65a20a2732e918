"""``memory:`` in the config: what people ask the bot to remember across conversations
(``core.memories``, docs/memory.md). A section of ``bot.config.Config``, kept here so that
file does not grow."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.memories import (
    MAX_CHARS,
    MAX_PER_CHANNEL,
    MAX_PER_USER,
    RECALL_CHARS,
    MemorySettings,
)


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = True
    """Off: no run recalls or changes memories (the ``remember``/``forget`` tools are gone)."""
    max_chars: int = Field(default=MAX_CHARS, ge=1, le=10_000)
    """Characters one memory holds at most."""
    max_per_user: int = Field(default=MAX_PER_USER, ge=1, le=10_000)
    """Memories one person may keep; at the limit ``remember`` names the oldest to forget."""
    max_per_channel: int = Field(default=MAX_PER_CHANNEL, ge=1, le=10_000)
    recall_chars: int = Field(default=RECALL_CHARS, ge=0, le=100_000)
    """Characters of memories given to the model before a run, the newest first."""
    channel_writers: Literal["admins", "anyone"] = "admins"
    """Who may keep memories for a whole channel (``remember`` with ``scope: channel``)."""

    def settings(self) -> MemorySettings:
        return MemorySettings(
            enabled=self.enabled,
            max_chars=self.max_chars,
            max_per_user=self.max_per_user,
            max_per_channel=self.max_per_channel,
            recall_chars=self.recall_chars,
            channel_writers=self.channel_writers,
        )
