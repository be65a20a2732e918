"""A place for the answering pipeline to answer in with nothing behind it: ``Reply`` is the
``Answering`` port of a surface that shows nothing, and its ``Follower`` reads each run's
events to the end as a live message would. For tests of what a run does to its stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, nullcontext

from adapters.live import LiveStats, RunView, Verbosity
from core.agent import Run
from core.events import Event


class Follower:
    def __init__(self) -> None:
        self.stats = LiveStats()

    async def follow(self, events: AsyncIterator[Event]) -> object:
        async for _ in events:
            pass
        return None


class Reply:
    """The answer's message is ``conversation``'s; ``where`` is what the run registry keeps
    of it (default: the conversation as the channel)."""

    def __init__(self, conversation: str, where: dict[str, str] | None = None) -> None:
        self.conversation = conversation
        self.place = where if where is not None else {"channel": conversation}

    async def open(self, verbosity: Verbosity) -> str | None:
        return self.conversation

    def reading(self) -> AbstractAsyncContextManager[object]:
        return nullcontext()

    async def show(self, run: Run, view: RunView) -> Follower:
        return Follower()

    async def note(self, text: str) -> None:
        return None

    async def ended(self, run: Run) -> None:
        return None

    def where(self) -> dict[str, str]:
        return self.place
