"""The fifth surface's ports: ``FifthReply`` (``adapters.dispatch.handlers.ask.Reply``: the
few steps of one answer only the platform knows), ``MessageSurface`` (``adapters.live.
Surface``: edit the message, post its trace in a thread) and ``finish_orphan`` (crash
recovery's ``Finalise``: a dead process's message ends interrupted, with Retry)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters import words
from adapters.dispatch.intents import Where
from adapters.live import EditRejected, LiveMessage, RunView, Verbosity
from adapters.pacing import EditPacer
from adapters.recovery import Finalise
from core.agent import Run
from core.stores import RunRecord
from core.trace import Trace
from tests.conformance.fifth.platform import Button, Platform, Refused
from tests.conformance.fifth.render import PlainRenderer, Post, clip

Asked = tuple[str, str]
"""The surface's own record of a question: who asked, and the message the answer replies to
(the question's, or the interrupted answer's that Retry was pressed under)."""


class MessageSurface:
    """One message of the bot's, edited in place."""

    def __init__(self, platform: Platform, message: str, channel: str) -> None:
        self.platform, self.message, self.channel = platform, message, channel

    @property
    def channel_key(self) -> str:
        return self.channel

    async def edit(self, payload: Post) -> None:
        try:
            self.platform.edit(self.message, payload.text, payload.buttons)
        except Refused as exc:
            raise EditRejected(str(exc)) from exc

    async def post_trace(self, trace: Trace, posts: Sequence[Post]) -> None:
        del trace
        for post in posts:
            self.platform.post(self.channel, self.platform.bot, post.text, thread=self.message)


@dataclass(slots=True)
class FifthReply:
    """One question's answer, posted where it was asked (in its thread, if it was)."""

    platform: Platform
    pacer: EditPacer
    where_asked: Where
    conversation: Callable[[Where], str]
    """``Dispatcher.conversation``: the one rule of which conversation this is."""
    asked: Asked
    message: str = ""

    async def open(self, verbosity: Verbosity) -> str | None:
        del verbosity
        return self.conversation(self.where_asked)

    def reading(self) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def show(self, run: Run, view: RunView) -> LiveMessage[Post]:
        renderer = PlainRenderer(run.trace.id)
        first = renderer.live(view)
        w = self.where_asked
        posted = self.platform.post(
            w.channel,
            self.platform.bot,
            first.text,
            thread=w.thread,
            buttons=first.buttons,
            reply_to=self.asked[1],
        )
        self.message = posted.id
        surface = MessageSurface(self.platform, posted.id, w.channel)
        return LiveMessage(surface, renderer, self.pacer, view=view, tick=1.0)

    async def note(self, text: str) -> None:
        self.platform.tell(self.asked[0], clip(text, 600))

    async def ended(self, run: Run) -> None:
        del run

    def where(self) -> dict[str, str]:
        return {"channel": self.where_asked.channel, "message": self.message}


def finisher(platform: Platform, verbosity: Verbosity) -> Finalise:
    """``adapters.recovery.Finalise``: the orphan's message as its trace left it, the
    recovery's words, and Retry when its question is known."""

    async def finish_orphan(record: RunRecord, trace: Trace, text: str) -> None:
        message = record.where.get("message", "")
        final = PlainRenderer(record.run_id).final(RunView.of_trace(trace, verbosity=verbosity))
        retry = (
            (Button(str(words.BUTTONS["retry"]), "retry", record.run_id),) if trace.question else ()
        )
        body = clip(f"{final.text}\n{text}", 4_000)
        with contextlib.suppress(Refused):  # the message was deleted meanwhile
            platform.edit(message, body, retry)

    return finish_orphan
