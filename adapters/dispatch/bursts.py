"""``agent.merge_window``: messages from one person in one conversation, each within the
window of the one before and before a run starts, are one question."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import Field, dataclass, field, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from core.files import Incoming


class Gathered(Protocol):
    """A question as a dataclass: its text and files are what a burst adds up."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def question(self) -> str: ...
    @property
    def files(self) -> Sequence[Incoming]: ...


G = TypeVar("G", bound=Gathered)


@dataclass(slots=True)
class _Burst(Generic[G]):
    first: G
    questions: list[str]
    files: list[Incoming]
    more: asyncio.Event = field(default_factory=asyncio.Event)


class Bursts(Generic[G]):
    """The first message waits out the window (at most ``MERGE_AT_MOST`` windows in all);
    each later one adds its text and files to it and is not answered on its own."""

    MERGE_AT_MOST = 4

    def __init__(self, window: float) -> None:
        self.window = window
        self._open: dict[str, _Burst[G]] = {}

    async def gather(self, ask: G, key: str) -> G | None:
        """The question the burst ``ask`` opens under ``key`` (one person in one
        conversation), once the window has passed; None when ``ask`` joined a burst
        already open (its text is in that one's question)."""
        if self.window <= 0:
            return ask
        burst = self._open.get(key)
        if burst is not None:
            burst.questions.append(ask.question)
            burst.files.extend(ask.files)
            burst.more.set()
            return None
        burst = self._open[key] = _Burst(ask, [ask.question], list(ask.files))
        try:
            await self._wait_out(burst)
        finally:
            del self._open[key]
        if len(burst.questions) == 1:
            return ask
        question = "\n".join(q for q in burst.questions if q)
        return replace(ask, question=question, files=tuple(burst.files))

    async def _wait_out(self, burst: _Burst[G]) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self.window * self.MERGE_AT_MOST
        while (left := until - loop.time()) > 0:
            burst.more.clear()
            try:
                async with asyncio.timeout(min(self.window, left)):
                    await burst.more.wait()
            except TimeoutError:
                return
