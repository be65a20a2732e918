"""``schedule:`` in the config: who may add scheduled questions and their limits
(``core.scheduler``, docs/schedules.md). A section of ``bot.config.Config``, kept here so that
file does not grow."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.when import check_zone


class ScheduleConfig(BaseModel):
    """Scheduled questions (docs/schedules.md): who may add them and their limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    default_timezone: str | None = None
    who: Literal["admins", "anyone"] = "admins"
    max_per_channel: int = Field(default=20, ge=1, le=10_000)
    max_per_user: int = Field(default=10, ge=1, le=10_000)
    min_interval_seconds: int = Field(default=300, ge=60, le=7 * 86400)
    catch_up_seconds: int = Field(default=3600, ge=0, le=7 * 86400)
    _zone = field_validator("default_timezone")(check_zone)
