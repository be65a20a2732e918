"""Hybrid lookup (issue 42, item 3): BM25 fused with dense vectors from an OpenAI-compatible
``/embeddings`` endpoint, through the real ``openai`` client over real HTTP to the local fake
(tests/fakes/embeddings_server.py, whose vectors are a hashed bag of words with a small
synonym table: a stand-in that proves the wiring, not semantic quality)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.embeddings import EmbeddingError, Hybrid, OpenAIEmbedder, VectorCache, fuse
from core.files import extract, passages_of
from core.knowledge import LookupTool
from tests.fakes.embeddings_server import FakeEmbeddings, Reply

KEY = "sk-embed-test"
MODEL = "fake-embed"


_made: list[Hybrid] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().aclose()


def _hybrid(fake: FakeEmbeddings, *, key: str = KEY, batch: int = 64, timeout: float = 5) -> Hybrid:
    embedder = OpenAIEmbedder(
        MODEL, base_url=fake.base_url, api_key=key, batch=batch, timeout=timeout
    )
    _made.append(Hybrid(VectorCache(embedder)))
    return _made[-1]


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "engines.md").write_text(
        "# Engines\n\nTo launch the engine, turn the brass key twice and wait for the hum.\n",
        encoding="utf-8",
    )
    (root / "boats.md").write_text(
        "# Boats\n\nThe vessel is moored at the north pier every winter.\n", encoding="utf-8"
    )
    (root / "cooking.md").write_text(
        "# Soup\n\nSimmer the onions for an hour before adding the stock.\n", encoding="utf-8"
    )
    return root


async def test_a_paraphrase_bm25_misses_is_found_by_the_hybrid(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    plain = LookupTool(root)
    assert await plain.search("how do I begin the motor") == []  # no shared word
    async with FakeEmbeddings() as fake:
        tool = LookupTool(root, embeddings=_hybrid(fake))
        hits = await tool.search("how do I begin the motor")
        assert hits[0].passage.file == "engines.md"
        # a query that shares words is still ranked first by both
        assert (await tool.search("vessel moored pier"))[0].passage.file == "boats.md"


async def test_passages_are_embedded_once_and_a_changed_file_again(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    async with FakeEmbeddings() as fake:
        tool = LookupTool(root, embeddings=_hybrid(fake), refresh_interval=0)
        await tool.load()  # at start: every passage, batched in one request
        assert len(fake.requests) == 1
        assert len(fake.inputs) == 3
        await tool.search("begin the motor")
        await tool.search("soup onions")
        assert len(fake.inputs) == 3 + 2  # the two queries, no passage again
        (root / "cooking.md").write_text(
            "# Soup\n\nSimmer the leeks for an hour before adding the stock.\n", encoding="utf-8"
        )
        await tool.search("soup leeks")
        new = fake.inputs[5:]
        assert len(new) == 2  # the changed passage and the query; the other two are cached
        assert "leeks" in new[0]


async def test_the_conversations_files_are_embedded_once_across_runs() -> None:
    pages = extract("notes.md", b"# Trip\n\nThe ferry departs at dawn from the old quay.\n")
    files = passages_of("notes.md", pages)
    async with FakeEmbeddings() as fake:
        base = LookupTool(embeddings=_hybrid(fake))
        for _ in range(3):  # three runs of one conversation: three tools, one embedding
            hits = await base.with_files(files).search("when does the boat leave")
            assert hits[0].passage.file == "notes.md"
        assert sum("ferry" in text for text in fake.inputs) == 1


@pytest.mark.parametrize(
    ("reply", "key", "batch", "why"),
    [
        (None, "sk-wrong", 64, "HTTP 401"),
        (Reply.error(429, retry_after="1"), KEY, 64, "HTTP 429"),
        (Reply.error(500), KEY, 64, "HTTP 500"),
        (Reply.slow(5), KEY, 64, "timed out"),
        (None, KEY, 5000, "HTTP 400"),  # more inputs in one request than the endpoint takes
    ],
)
async def test_a_failing_endpoint_falls_back_to_bm25_with_one_log_line(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    reply: Reply | None,
    key: str,
    batch: int,
    why: str,
) -> None:
    root = _folder(tmp_path)
    async with FakeEmbeddings(max_inputs=2 if batch > 64 else 2048) as fake:
        if reply is not None:
            fake.enqueue(reply)
        tool = LookupTool(root, embeddings=_hybrid(fake, key=key, batch=batch, timeout=0.5))
        with caplog.at_level(logging.WARNING, logger="core.embeddings"):
            result = await tool.run("vessel moored pier")
    assert result.sources == ("boats.md",)  # BM25's answer, as without embeddings
    lines = [r.getMessage() for r in caplog.records if r.name == "core.embeddings"]
    assert len(lines) == 1
    assert why in lines[0] and "BM25 alone" in lines[0]
    assert key not in lines[0]


async def test_inputs_are_sent_in_batches_the_endpoint_accepts(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    async with FakeEmbeddings(max_inputs=2) as fake:
        tool = LookupTool(root, embeddings=_hybrid(fake, batch=2))
        hits = await tool.search("begin the motor")
    assert hits[0].passage.file == "engines.md"
    assert [len(body["input"]) for body in fake.requests] == [2, 1, 1]


async def test_an_overlong_input_is_cut_before_it_is_sent() -> None:
    async with FakeEmbeddings(max_tokens=2100) as fake:
        embedder = OpenAIEmbedder(MODEL, base_url=fake.base_url, api_key=KEY)
        (vector,) = await embedder.embed(["word " * 10_000])
        assert len(vector) == 2048
        fake.max_tokens = 100
        with pytest.raises(EmbeddingError, match="HTTP 400"):
            await embedder.embed(["word " * 10_000])
        await embedder.aclose()
        assert fake.requests[0]["encoding_format"] == "float"


async def test_an_unknown_model_is_an_embedding_error() -> None:
    async with FakeEmbeddings() as fake:
        embedder = OpenAIEmbedder("no-such-model", base_url=fake.base_url, api_key=KEY)
        with pytest.raises(EmbeddingError, match="HTTP 404"):
            await embedder.embed(["hello"])
        await embedder.aclose()


async def test_without_embeddings_the_ranking_is_bm25s_exactly(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    tool = LookupTool(root)
    assert tool.embeddings is None
    hits = await tool.search("vessel moored pier")
    assert [h.passage.file for h in hits] == ["boats.md"]


def test_fusion_rewards_agreement_and_keeps_first_seen_order_on_ties() -> None:
    fused = fuse([["a", "b"], ["c", "b"]], k=60)  # second in both beats first in one
    assert fused == [("b", 2 / 62), ("a", 1 / 61), ("c", 1 / 61)]
    assert fuse([["x"], ["y"]]) == [("x", 1 / 61), ("y", 1 / 61)]


async def test_the_three_keys_turn_the_hybrid_on_and_the_key_comes_from_env(
    tmp_path: Path,
) -> None:
    from bot.app import App
    from bot.config import load_config

    root = _folder(tmp_path)
    async with FakeEmbeddings() as fake:
        env = {
            "REACTBOT_TOOLS__LOOKUP__PATHS": f'["{root}"]',
            "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__MODEL": MODEL,
            "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__BASE_URL": fake.base_url,
            "REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__API_KEY_ENV": "EMBED_KEY",
            "EMBED_KEY": KEY,
        }
        app = App.create(load_config(None, env))
        try:
            tool = app.agent.tools.get("lookup")
            assert isinstance(tool, LookupTool) and tool.embeddings is not None
            assert KEY in app.config.secrets.values()  # scrubbed from any text like others
            hits = await tool.search("how do I begin the motor")
            assert hits[0].passage.file == "engines.md"
            assert fake.requests  # through the endpoint, with the key from the environment
        finally:
            await app.aclose()
        del env["EMBED_KEY"]  # and OpenAI's API, which needs a key
        del env["REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__BASE_URL"]
        app = App.create(load_config(None, env))
        try:
            tool = app.agent.tools.get("lookup")
            assert isinstance(tool, LookupTool) and tool.embeddings is None  # BM25 alone
            assert any("EMBED_KEY" in note for note in app.notes)
        finally:
            await app.aclose()
    app = App.create(load_config(None, {}))
    try:
        tool = app.agent.tools.get("lookup")
        assert isinstance(tool, LookupTool) and tool.embeddings is None
    finally:
        await app.aclose()


def test_a_key_written_where_its_variables_name_belongs_is_refused_unechoed() -> None:
    from bot.config import ConfigError, load_config

    token = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"REACTBOT_TOOLS__LOOKUP__EMBEDDINGS__API_KEY_ENV": token})
    assert "tools.lookup.embeddings.api_key_env" in str(caught.value)
    assert "looks like a secret" in str(caught.value) and token not in str(caught.value)
