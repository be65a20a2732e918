"""``reactbot memory list|export|forget|clear`` on the real Redis: the operator sees what a
person asked the bot to remember, exports it as JSON, and a deletion made there holds on the
next run of another process (each run reads the store; nothing is cached)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from bot.cli import run_cli
from core.agent import Agent
from core.memories import Asking, Memories, Memory
from core.prompt import MEMORY_LEAD
from core.scripted import ScriptedModel
from core.stores.redis import RedisStores
from core.stores.redis.memories import RedisMemories
from core.tools import ToolRegistry
from tests.memories import SLACK_C1, SLACK_C2, SLACK_DM


def config_with_prefix(tmp_path: Path, prefix: str) -> str:
    path = tmp_path / "redis.yaml"
    path.write_text(f'redis:\n  prefix: "{prefix}"\n')
    return str(path)


async def cli(*argv: str, config: str, redis_url: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli([*argv, "--config", config], env={"REDIS_URL": redis_url}, stdout=out)
    return code, out.getvalue()


async def test_the_operator_lists_exports_and_forgets_and_the_next_run_obeys(
    tmp_path: Path, redis_url: str, redis_prefix: str, stores: RedisStores
) -> None:
    store = RedisMemories(stores.client, prefix=redis_prefix)
    hostile = "call me Ada\x1b[31m <@everyone> [x](https://evil.example)"
    await store.add(Memory("m1", "I manage payments", "person", "U1", SLACK_C1, 1.0), limit=9)
    await store.add(Memory("m2", hostile, "person", "U1", SLACK_DM, 2.0), limit=9)
    await store.add(Memory("m3", "Bob's", "person", "U2", SLACK_C1, 3.0), limit=9)
    config = config_with_prefix(tmp_path, redis_prefix)
    whose = ("--platform", "slack", "--user", "U1")

    code, listed = await cli("memory", "list", *whose, config=config, redis_url=redis_url)
    assert code == 0
    lines = listed.splitlines()
    assert [line.split()[0] for line in lines] == ["m2", "m1"], "newest first, Ada's only"
    assert "\x1b" not in listed and "␛" in lines[0], "control characters made visible"
    assert "DM" in lines[0] and "slack:T1:C1" in lines[1]

    code, exported = await cli("memory", "export", *whose, config=config, redis_url=redis_url)
    data = json.loads(exported)
    assert code == 0 and [m["id"] for m in data] == ["m2", "m1"]
    assert data[0]["text"] == hostile and data[0]["where"]["private"] is True

    # a run on another process sees m1 in a channel of the workspace...
    model = ScriptedModel(["Thought: a\nAction: finish[a]", "Thought: b\nAction: finish[b]"])
    agent = Agent(
        model, ToolRegistry(), memories=Memories(RedisMemories(stores.client, prefix=redis_prefix))
    )
    ada = Asking("U1", "Ada", False, SLACK_C2)
    await agent.start("hi", asking=ada).wait()
    assert "I manage payments" in model.calls[0].messages[-2]["content"]
    # ...until the operator forgets it
    code, said = await cli(
        "memory", "forget", "m1", "m9", *whose, config=config, redis_url=redis_url
    )
    assert code == 1 and "forgot 1" in said, "m9 was no memory of Ada's"
    await agent.start("hi", asking=ada).wait()
    assert not any(m["content"].startswith(MEMORY_LEAD) for m in model.calls[1].messages)
    model.assert_complete()

    code, said = await cli("memory", "clear", *whose, config=config, redis_url=redis_url)
    assert code == 0 and "cleared 1" in said
    code, listed = await cli("memory", "list", *whose, config=config, redis_url=redis_url)
    assert "No memories" in listed
    bob = ("--platform", "slack", "--user", "U2")
    code, listed = await cli("memory", "list", *bob, config=config, redis_url=redis_url)
    assert listed.split()[0] == "m3", "another person's memories untouched"


async def test_an_export_holds_no_raw_terminal_controls_and_stays_exact(
    tmp_path: Path, redis_url: str, redis_prefix: str, stores: RedisStores
) -> None:
    """Hole (memory review): ``export`` printed C1 controls (``\\x9b`` is an 8-bit CSI) and
    bidi overrides of a memory kept before ``remember`` cleaned its text raw to the
    operator's terminal; JSON escapes only those below U+0020."""
    store = RedisMemories(stores.client, prefix=redis_prefix)
    text = "a\u202eb\x9b31m\x85c\x7f\u2067 ☃ Ада"
    await store.add(Memory("m1", text, "person", "U1", SLACK_C1, 1.0), limit=9)
    config = config_with_prefix(tmp_path, redis_prefix)
    whose = ("--platform", "slack", "--user", "U1")
    code, exported = await cli("memory", "export", *whose, config=config, redis_url=redis_url)
    assert code == 0
    for raw in ("\u202e", "\x9b", "\x85", "\x7f", "\u2067"):
        assert raw not in exported
    assert "☃ Ада" in exported, "readable text stays readable"
    assert json.loads(exported)[0]["text"] == text, "the JSON is exact"


async def test_an_undecodable_id_is_one_line_not_a_traceback(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    """Hole (memory review): bytes the shell could not decode reach argv as lone
    surrogates, and the Redis client's encoder raised UnicodeEncodeError (a traceback)."""
    config = config_with_prefix(tmp_path, redis_prefix)
    for argv in (
        ("memory", "list", "--platform", "slack", "--user", "U\udcff"),
        ("memory", "forget", "m\udcff", "--platform", "slack", "--user", "U1"),
    ):
        code, _ = await cli(*argv, config=config, redis_url=redis_url)
        assert code == 2


async def test_a_store_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    """Hole (memory review): with Redis down, ``reactbot memory`` ended in a
    StoreUnavailable traceback (after a warning about "answering without memory")."""
    import contextlib

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code, out = await cli(
            "memory",
            "list",
            "--platform",
            "slack",
            "--user",
            "U1",
            config=config_with_prefix(tmp_path, "t:"),
            redis_url="redis://127.0.0.1:1/0",
        )
    assert code == 1 and out == ""
    assert "cannot reach the memory store" in err.getvalue()
