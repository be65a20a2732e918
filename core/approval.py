"""A person decides before a tool runs: the request, the decision, and the broker between.

The agent asks its ``Approver`` for a ``Decision`` on an ``ApprovalRequest`` (emitting
``ApprovalRequested`` first, so every surface can show the pending step). ``ApprovalBroker``
is the approver the application uses: it parks the request until someone decides, wherever
that happens. A surface that got a click calls ``broker.decide(...)``; the decision travels
over a ``DecisionChannel`` (Redis pub/sub when configured, so a click on any process reaches
the one running the run) and resolves the waiting request. "Allow for this conversation" is
remembered in ``Allowances`` (Redis when configured), so the tool runs without asking again.

Who may decide is the surface's question (it knows who clicked and who the admins are); the
broker only carries decisions. A request nobody decides is denied by the agent's timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

Verdict = Literal["approve", "edit", "deny", "always"]
"""``always``: approve, and allow this tool for the rest of the conversation."""

VERDICTS: frozenset[str] = frozenset({"approve", "edit", "deny", "always"})


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    run_id: str
    conversation: str
    asker: str
    step: int
    call: int
    thought: str
    name: str
    input: str
    json_input: bool
    """The input is a JSON object (a tool with several arguments): edit it as JSON."""
    timeout: float
    remember: bool
    """"Allow for this conversation" may be offered."""


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    by: str
    input: str | None = None
    """The edited input (``edit`` only)."""
    reason: str = ""
    """Why, when the person said (a denial's reason, from a modal)."""
    by_id: str = ""
    """The platform's id of ``by`` when ``by`` is a display name (Discord)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision | None:
        """A decision read off a channel; None for anything malformed."""
        verdict, by = data.get("verdict"), data.get("by")
        edited, reason = data.get("input"), data.get("reason", "")
        if verdict not in VERDICTS or not isinstance(by, str):
            return None
        if edited is not None and not isinstance(edited, str):
            return None
        if verdict == "edit" and edited is None:
            return None
        by_id = data.get("by_id", "")
        return cls(
            verdict,
            by,
            edited,
            reason if isinstance(reason, str) else "",
            by_id if isinstance(by_id, str) else "",
        )


class Approver(Protocol):
    async def __call__(self, request: ApprovalRequest) -> Decision: ...


RequestKey = tuple[str, int, int]
"""``(run_id, step, call)``: which action a decision is for."""

DecisionHandler = Callable[[RequestKey, Decision], None]


class DecisionChannel(Protocol):
    """Decisions made on any process, heard by the process running the run."""

    async def publish(self, key: RequestKey, decision: Decision) -> None: ...

    def subscribe(self, handler: DecisionHandler) -> AbstractAsyncContextManager[None]: ...


class PendingRequests(Protocol):
    """The requests waiting for a decision, readable by every process: a click on another
    process needs the request (an Edit modal shows its input)."""

    async def put(self, request: ApprovalRequest) -> None: ...

    async def get(self, key: RequestKey) -> ApprovalRequest | None: ...

    async def drop(self, key: RequestKey) -> None: ...


class Allowances(Protocol):
    """Tools a conversation allowed once for all ("Allow for this conversation")."""

    async def allowed(self, conversation: str, tool: str) -> str | None:
        """Who allowed ``tool`` in ``conversation``, or None."""
        ...

    async def allow(self, conversation: str, tool: str, *, by: str) -> None: ...


# ---- in-process implementations --------------------------------------------------------------


class InMemoryDecisions:
    """Decisions go straight to this process's subscribers."""

    def __init__(self) -> None:
        self._handlers: list[DecisionHandler] = []

    async def publish(self, key: RequestKey, decision: Decision) -> None:
        self.dispatch(key, decision)

    def dispatch(self, key: RequestKey, decision: Decision) -> None:
        for handler in list(self._handlers):
            try:
                handler(key, decision)
            except Exception:
                log.exception("a decision handler failed for %s", key)

    @asynccontextmanager
    async def subscribe(self, handler: DecisionHandler) -> AsyncIterator[None]:
        self._handlers.append(handler)
        try:
            yield
        finally:
            self._handlers.remove(handler)


class InMemoryAllowances:
    """Allowances in this process, for at most ``max_conversations`` (least recently used go)."""

    def __init__(self, *, max_conversations: int = 10_000) -> None:
        self._max = max_conversations
        self._allowed: OrderedDict[str, dict[str, str]] = OrderedDict()

    async def allowed(self, conversation: str, tool: str) -> str | None:
        return self.allowed_now(conversation, tool)

    def allowed_now(self, conversation: str, tool: str) -> str | None:
        tools = self._allowed.get(conversation)
        return tools.get(tool.lower()) if tools else None

    async def allow(self, conversation: str, tool: str, *, by: str) -> None:
        self.allow_now(conversation, tool, by=by)

    def allow_now(self, conversation: str, tool: str, *, by: str) -> None:
        self._allowed.setdefault(conversation, {})[tool.lower()] = by
        self._allowed.move_to_end(conversation)
        while len(self._allowed) > self._max:
            self._allowed.popitem(last=False)


class InMemoryPending:
    def __init__(self) -> None:
        self._requests: dict[RequestKey, ApprovalRequest] = {}

    async def put(self, request: ApprovalRequest) -> None:
        self._requests[key_of(request)] = request

    async def get(self, key: RequestKey) -> ApprovalRequest | None:
        return self._requests.get(key)

    async def drop(self, key: RequestKey) -> None:
        self._requests.pop(key, None)


def key_of(request: ApprovalRequest) -> RequestKey:
    return (request.run_id, request.step, request.call)


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
