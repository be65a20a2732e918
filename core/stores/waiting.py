"""What every backend shares around waiting: calling a waiter, delivering a stop request
to one subscriber, and renewing a lease while its holder lives.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from core.stores.protocols import OnWait, StopHandler

log = logging.getLogger(__name__)


async def notify_wait(on_wait: OnWait | None) -> None:
    """Call a sync or async ``on_wait`` callback."""
    if on_wait is None:
        return
    result = on_wait()
    if inspect.isawaitable(result):
        await result


def deliver(handler: StopHandler, run_id: str, by: str, by_id: str = "") -> None:
    """Call one subscriber; its bug is logged, so the others (and the listener) go on."""
    try:
        handler(run_id, by, by_id)
    except Exception:
        log.exception("a stop request handler failed for run %s", run_id)


@asynccontextmanager
async def renewing(
    renew: Callable[[], Awaitable[object]], *, every: float, until: float, what: str
) -> AsyncIterator[None]:
    """Call ``renew`` every ``every`` seconds while the block runs, for at most ``until``
    seconds.

    A lease (a conversation lock, a run slot) should outlive a crashed holder by little, yet a
    live holder may need it longer: a person deciding on an approval pauses the run's
    deadline. So the holder renews it while it lives, up to the longest a healthy run can
    take (``until``); a holder that hangs past that loses it as if it had crashed. A failed
    renewal is logged and tried again at the next beat; the block is never disturbed.

    The beat ends when the block does even if a call inside ``renew`` swallows the
    cancellation (``asyncio.wait_for`` before Python 3.12 does when what it waits for
    completes at the same moment): a beat that went on would keep a finished holder's lease
    alive, and this block's exit waiting for it."""
    ended = False

    async def beat() -> None:
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + until
        while not ended and (left := stop_at - loop.time()) > 0:
            await asyncio.sleep(min(every, left))  # the last beat falls on ``until`` itself
            try:
                await renew()
            except Exception as exc:  # the next beat tries again; the lease is the backstop
                log.warning("could not renew %s: %s", what, exc)

    task = asyncio.get_running_loop().create_task(beat(), name=f"renew {what}")
    try:
        yield
    finally:
        ended = True
        task.cancel()
        await asyncio.wait({task})
