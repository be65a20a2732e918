"""A person decides before a tool runs: the request, the decision, and the broker between.

The agent asks its ``Approver`` for a ``Decision`` on an ``ApprovalRequest`` (emitting
``ApprovalRequested`` first, so every surface can show the pending step). ``ApprovalBroker``
is the approver the application uses: it parks the request until someone decides, wherever
that happens. A surface that got a click calls ``broker.decide(...)``; the decision travels
over a ``DecisionChannel`` (Redis pub/sub when configured, so a click on any process reaches
the one running the run) and resolves the waiting request. "Allow for this conversation" is
remembered in ``Allowances`` (Redis when configured), so the tool runs without asking again.

The request, the decision and their stores live in ``core.stores`` (named here too).

Who may decide is the surface's question (it knows who clicked and who the admins are); the
broker only carries decisions. A request nobody decides is denied by the agent's timeout.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol

from core.stores.memory import InMemoryAllowances, InMemoryDecisions, InMemoryPending
from core.stores.protocols import Allowances, DecisionChannel, PendingRequests
from core.stores.records import (
    VERDICTS,
    ApprovalRequest,
    Decision,
    DecisionHandler,
    RequestKey,
    Verdict,
    key_of,
)

__all__ = [
    "VERDICTS",
    "Allowances",
    "ApprovalBroker",
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
    "Decision",
    "DecisionChannel",
    "DecisionHandler",
    "InMemoryAllowances",
    "InMemoryDecisions",
    "InMemoryPending",
    "PendingRequests",
    "RequestKey",
    "Verdict",
    "key_of",
]

log = logging.getLogger(__name__)


class Approver(Protocol):
    async def __call__(self, request: ApprovalRequest) -> Decision: ...


# ---- the broker -------------------------------------------------------------------------------


class ApprovalBroker:
    """The application's ``Approver``: parks each request until a decision for it arrives
    on the channel (from this process or another). ``start`` subscribes; call it once."""

    def __init__(self, channel: DecisionChannel, pending: PendingRequests | None = None) -> None:
        self.channel = channel
        self.shared = pending or InMemoryPending()
        self._waiting: dict[RequestKey, asyncio.Future[Decision]] = {}
        self._requests: dict[RequestKey, ApprovalRequest] = {}
        self._listening: AbstractAsyncContextManager[None] | None = None

    async def __call__(self, request: ApprovalRequest) -> Decision:
        key = key_of(request)
        waiting: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[key] = waiting
        self._requests[key] = request
        try:
            await self.shared.put(request)
            return await waiting
        finally:
            self._waiting.pop(key, None)
            self._requests.pop(key, None)
            try:
                await asyncio.shield(self.shared.drop(key))
            except Exception:  # its TTL removes it anyway
                log.warning("could not drop the pending request %s", key)

    def pending(self, key: RequestKey) -> ApprovalRequest | None:
        """The request this process is waiting on for ``key`` (None: not here, or decided)."""
        return self._requests.get(key)

    async def request(self, key: RequestKey) -> ApprovalRequest | None:
        """The request waiting for ``key`` on any process (None: decided or unknown)."""
        return self._requests.get(key) or await self.shared.get(key)

    async def decide(self, key: RequestKey, decision: Decision) -> None:
        """A person decided (on this process): resolve it here, or send it to the process
        that runs the run."""
        if not self._resolve(key, decision):
            await self.channel.publish(key, decision)

    def _resolve(self, key: RequestKey, decision: Decision) -> bool:
        waiting = self._waiting.get(key)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(decision)
        return True

    async def start(self) -> None:
        if self._listening is None:
            self._listening = self.channel.subscribe(self._heard)
            await self._listening.__aenter__()

    async def aclose(self) -> None:
        if self._listening is not None:
            listening, self._listening = self._listening, None
            await listening.__aexit__(None, None, None)

    def _heard(self, key: RequestKey, decision: Decision) -> None:
        self._resolve(key, decision)


class AutoApprover:
    """Decides every request the same way (``reactbot ask --approve yes|no``, tests)."""

    def __init__(self, verdict: Literal["approve", "deny"], *, by: str, reason: str = "") -> None:
        self.verdict: Verdict = verdict
        self.by = by
        self.reason = reason

    async def __call__(self, request: ApprovalRequest) -> Decision:
        return Decision(self.verdict, self.by, reason=self.reason)
