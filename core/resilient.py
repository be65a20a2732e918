"""Moved to ``core.stores.resilient``; these names stay importable from here until every
import site says ``core.stores.resilient``."""

from __future__ import annotations

from core.stores.resilient import (
    DEFAULT_RETRY_AFTER,
    FULL_LOG_EVERY,
    MEMORY_UNAVAILABLE,
    CheckedFileStore,
    CheckedUsageCounters,
    OnUnavailable,
    ResilientAllowances,
    ResilientChannelSettings,
    ResilientCooldowns,
    ResilientDecisions,
    ResilientEventClaims,
    ResilientHistory,
    ResilientLocks,
    ResilientPending,
    ResilientRunRegistry,
    ResilientRunSlots,
    ResilientStopRequests,
    ResilientTraceStore,
    StoreHealth,
)

__all__ = [
    "DEFAULT_RETRY_AFTER",
    "FULL_LOG_EVERY",
    "MEMORY_UNAVAILABLE",
    "CheckedFileStore",
    "CheckedUsageCounters",
    "OnUnavailable",
    "ResilientAllowances",
    "ResilientChannelSettings",
    "ResilientCooldowns",
    "ResilientDecisions",
    "ResilientEventClaims",
    "ResilientHistory",
    "ResilientLocks",
    "ResilientPending",
    "ResilientRunRegistry",
    "ResilientRunSlots",
    "ResilientStopRequests",
    "ResilientTraceStore",
    "StoreHealth",
]
