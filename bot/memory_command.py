"""``reactbot memory list|export|forget|clear --platform P --user ID``: the operator's view of
what people asked the bot to remember (``core.memories``), straight from the shared store.

``--channel PLACE`` (``slack:T1:C1``, ``discord:42``, ``telegram:-100``, a web session's
conversation) acts on a channel's memories instead of a person's. ``export`` prints JSON;
the others print one line per memory, control characters made visible. A deletion is in
the store at once, and every run reads the store: the next run of every process no longer
sees it. Without Redis each process has its own memories, so the command says so.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import TYPE_CHECKING, Any

from core.errors import StoreUnavailable
from core.memories import Holder, Memory

if TYPE_CHECKING:
    from rich.console import Console

    from bot.app import App

SUBCOMMANDS = ("list", "export", "forget", "clear")

NO_REDIS = (
    "Without Redis, memories live only inside each running bot: this command sees none of "
    "them. Set REDIS_URL to keep them in one shared store."
)


def add_memory_parser(sub: Any, config: argparse.ArgumentParser) -> None:
    memory = sub.add_parser(
        "memory",
        parents=[config],
        help="list, export, forget or clear what one person (or channel) asked the bot to remember",
    )
    memory.add_argument("memory_command", choices=SUBCOMMANDS, metavar="|".join(SUBCOMMANDS))
    memory.add_argument("ids", nargs="*", metavar="ID", help="forget: the memories' ids")
    memory.add_argument("--platform", required=True, help="slack, discord, telegram or web")
    whose = memory.add_mutually_exclusive_group(required=True)
    whose.add_argument("--user", help="the person's id on the platform")
    whose.add_argument("--channel", help="a channel's place (slack:T1:C1) instead of a person")


def holder_of(args: argparse.Namespace) -> Holder:
    platform = str(args.platform).strip().lower()
    if args.user is not None:
        return Holder.person(platform, str(args.user).strip())
    return Holder("channel", platform, str(args.channel).strip())


def _encodable(text: str) -> bool:
    """Bytes the shell could not decode reach ``argv`` as lone surrogates: no store key."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def memory_row(memory: Memory) -> str:
    """``id  date  where  text``: one line, whatever the text holds."""
    day = time.strftime("%Y-%m-%d %H:%M", time.gmtime(memory.at))
    where = "DM" if memory.where.private else memory.where.place
    text = " ".join(memory.text.split())
    return f"{memory.id}  {day}  {where}  {text}"


def memory_json(memory: Memory) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(memory.to_json())
    platform, space, place, private, closed = data.pop("where")
    data["where"] = {
        "platform": platform,
        "space": space,
        "place": place,
        "private": private,
        "closed": closed,
    }
    return data


_RAW = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What ``json.dumps`` leaves raw that a terminal obeys: DEL and the C1 controls (``\\x9b``
is an 8-bit CSI), and the bidirectional controls that reorder what follows."""


def exported_json(memories: list[Memory]) -> str:
    """The memories as JSON, exact, with nothing a terminal would obey: such characters are
    written as ``\\uXXXX`` escapes, the rest stays readable."""
    text = json.dumps([memory_json(m) for m in memories], ensure_ascii=False, indent=2)
    return _RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


UNREACHABLE = "cannot reach the memory store: nothing was read or changed; try again later"


async def memory_command(
    app: App, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    try:
        return await _memory_command(app, args, console, errors)
    except StoreUnavailable:
        errors.print(UNREACHABLE, style="red", markup=False)
        return 1


async def _memory_command(
    app: App, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    from adapters.terminal.render import printable

    if not app.config.redis.configured:
        errors.print(f"note: {NO_REDIS}", style="dim", markup=False)
    store, holder = app.stores.memories, holder_of(args)
    if not all(_encodable(x) for x in (holder.key, *args.ids)):
        errors.print("an id is not valid text (undecodable bytes): nothing done", markup=False)
        return 2
    action = args.memory_command
    if action == "forget":
        if not args.ids:
            errors.print("say which: reactbot memory forget ID... --platform P --user ID")
            return 2
        gone = await store.delete(holder, args.ids)
        missing = [i for i in dict.fromkeys(args.ids) if i not in gone]
        console.print(f"forgot {len(gone)}", markup=False)
        for ident in missing:
            errors.print(printable(f"no memory {ident} of {holder.key}"), markup=False)
        return 0 if not missing else 1
    if action == "clear":
        console.print(f"cleared {await store.clear(holder)}", markup=False)
        return 0
    kept = await store.list(holder)
    if action == "export":
        console.print(exported_json(kept), markup=False, emoji=False)
        return 0
    for memory in kept:
        console.print(printable(memory_row(memory)), markup=False, emoji=False)
    if not kept:
        console.print(f"No memories of {printable(holder.key)}.", markup=False)
    return 0
