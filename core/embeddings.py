"""Dense retrieval for ``lookup``: passage vectors from an OpenAI-compatible ``/embeddings``
endpoint (OpenAI, Ollama, vLLM, ...), ranked by cosine and fused with BM25 by rank.

    Embedder          one method, ``embed(texts) -> vectors``; ``OpenAIEmbedder`` speaks
                      ``POST {base_url}/embeddings`` through the real ``openai`` client
    VectorCache       vectors by content hash (model and text): a passage is embedded once,
                      a changed one again, an unchanged one never; bounded (least recently
                      used forgotten first); in this process's memory
    fuse              reciprocal rank fusion of rankings (``RRF_K``)
    Hybrid            BM25 (``search_together``) and cosine over the same passages, fused;
                      ``core.knowledge.LookupTool`` uses it when ``tools.lookup.embeddings``
                      names a model

Errors::

    ReactbotError
    └── EmbeddingError    the endpoint failed (timeout, 4xx, 5xx, a malformed reply); the
                          lookup falls back to BM25 for that query and logs one line
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import operator
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from core.errors import ReactbotError
from core.tools.lookup import BM25Index, Hit, Passage, search_together

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "RRF_K",
    "Embedder",
    "EmbeddingError",
    "Hybrid",
    "OpenAIEmbedder",
    "VectorCache",
    "cosine_ranking",
    "fuse",
]

RRF_K = 60
"""Reciprocal rank fusion's constant: a passage scores ``sum(1 / (RRF_K + rank))`` over the
rankings it is in. 60 is the value of Cormack, Clarke and Büttcher (SIGIR 2009), which they
found robust across collections: large enough that the first few ranks of one ranking do not
drown the other (rank 1 scores 1/61, rank 5 1/65), small enough that a passage both rankings
put near the top beats one only a single ranking likes."""
BATCH = 64
"""Inputs per request: far below OpenAI's 2,048, and small enough for local servers."""
INPUT_CHARS = 8_000
"""An input is cut to this many characters (about 2,000 tokens, under every common model's
limit: OpenAI's 8,192 tokens, nomic-embed-text's 2,048)."""
CACHE_VECTORS = 50_000
TIMEOUT = 10.0

POOL = 10
"""Candidates each ranking brings to the fusion: about three times what a lookup shows. RRF
rewards a passage found by both rankings at any depth over one ranked first by only one
(rank 10 in both: 2/70; first in one: 1/61), so a deep pool lets BM25's incidental matches
for a paraphrase outvote the dense ranking's first hit. On evals/retrieval.jsonl with the
embeddings fake, paraphrase recall@3 was 0.13 with 50, 0.23 with 20, 0.40 with 10 and 0.63
with 5, the literal half 1.00 throughout; 10 is kept rather than the best figure, which
would be tuned to this one question set."""
THREAD_VECTORS = 500
"""Cosine over more vectors than this runs in a thread, off the event loop."""

Vector = array  # of "f": 4 bytes a number, not a list's 32 (3,000 x 1,536 dims: 18 MB)
T = TypeVar("T", bound=Hashable)
logger = logging.getLogger(__name__)


class EmbeddingError(ReactbotError):
    """The embeddings endpoint did not give vectors; ``reason`` is safe to log (no key, no
    reply body)."""


class Embedder(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> list[Vector[float]]: ...

    async def aclose(self) -> None: ...


class OpenAIEmbedder:
    """``embeddings.create`` on an OpenAI-compatible endpoint, ``batch`` inputs a request.
    No retries: a lookup falls back to BM25 at once rather than waiting out a ``Retry-After``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = TIMEOUT,
        batch: int = BATCH,
        client: AsyncOpenAI | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        from openai import AsyncOpenAI

        self.name = model
        self.batch = batch
        # Local servers (Ollama, vLLM) take no key, but the client insists on one.
        self._client = client or AsyncOpenAI(
            api_key=api_key or "no-key", base_url=base_url, timeout=timeout, max_retries=0
        )

    async def embed(self, texts: Sequence[str]) -> list[Vector[float]]:
        vectors: list[Vector[float]] = []
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            vectors += await self._request([text[:INPUT_CHARS] or " " for text in chunk])
        return vectors

    async def _request(self, inputs: list[str]) -> list[Vector[float]]:
        import openai

        try:
            reply = await self._client.embeddings.create(
                model=self.name, input=inputs, encoding_format="float"
            )
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"HTTP {exc.status_code} ({type(exc).__name__})") from exc
        except openai.APITimeoutError as exc:
            raise EmbeddingError("timed out") from exc
        except openai.APIError as exc:
            raise EmbeddingError(type(exc).__name__) from exc
        data = sorted(reply.data, key=operator.attrgetter("index"))
        if len(data) != len(inputs) or any(not item.embedding for item in data):
            raise EmbeddingError(f"{len(data)} vectors for {len(inputs)} inputs")
        return [_unit([float(x) for x in item.embedding]) for item in data]

    async def aclose(self) -> None:
        await self._client.close()


def _unit(vector: list[float]) -> Vector[float]:
    """``vector`` scaled to length 1, so cosine is a dot product (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    if not norm or not math.isfinite(norm):
        return array("f", bytes(4 * len(vector)))
    return array("f", [x / norm for x in vector])


class VectorCache:
    """Vectors by the SHA-256 of the model's name and the text; ``vectors`` embeds only the
    texts it has not seen (in the embedder's batches) and keeps at most ``limit``."""

    def __init__(self, embedder: Embedder, *, limit: int = CACHE_VECTORS) -> None:
        self.embedder = embedder
        self.limit = limit
        self._vectors: OrderedDict[bytes, Vector[float]] = OrderedDict()
        self._lock = asyncio.Lock()
        self.embedded = 0
        """Texts sent to the endpoint so far (what the cache saved is what this is not)."""

    def __len__(self) -> int:
        return len(self._vectors)

    async def vectors(self, texts: Sequence[str]) -> list[Vector[float]]:
        keys = [self._key(text) for text in texts]
        async with self._lock:  # two runs asking at once embed a new file once, not twice
            missing = {
                key: text for key, text in zip(keys, texts, strict=True) if key not in self._vectors
            }
            if missing:
                found = await self.embedder.embed(list(missing.values()))
                self.embedded += len(missing)
                self._vectors.update(zip(missing, found, strict=True))
            out = []
            for key in keys:
                self._vectors.move_to_end(key)
                out.append(self._vectors[key])
            while len(self._vectors) > max(self.limit, len(keys)):
                self._vectors.popitem(last=False)
            return out

    def _key(self, text: str) -> bytes:
        material = f"{self.embedder.name}\x00{text[:INPUT_CHARS]}".encode("utf-8", "replace")
        return hashlib.sha256(material).digest()


def cosine_ranking(
    query: Sequence[float], vectors: Sequence[Sequence[float]], *, limit: int
) -> list[int]:
    """The positions of the ``limit`` vectors nearest ``query`` (all unit length), best first;
    ties to the earlier position. Vectors of another length than the query's are skipped."""
    scored = [
        (sum(map(operator.mul, query, vector)), -position)
        for position, vector in enumerate(vectors)
        if len(vector) == len(query)
    ]
    scored.sort(reverse=True)
    return [-position for score, position in scored[:limit] if score > 0]


def fuse(rankings: Sequence[Sequence[T]], *, k: int = RRF_K) -> list[tuple[T, float]]:
    """Reciprocal rank fusion: every item of any ranking with ``sum(1 / (k + rank))``, rank
    from 1, best first; ties keep the order in which the items were first seen."""
    scores: dict[T, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: n for n, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


class Hybrid:
    """Ranks passages by BM25 and by cosine to the query's vector, fused with ``fuse``. An
    index's vectors are looked up once per index object (a folder's, until it is rebuilt; a
    run's files, for that run) and come from ``cache``: only passages never seen are
    embedded. When the endpoint fails, that query is ranked by BM25 alone."""

    def __init__(self, cache: VectorCache, *, pool: int = POOL, k: int = RRF_K) -> None:
        self.cache = cache
        self.pool = pool
        self.k = k
        self._by_index: weakref.WeakKeyDictionary[BM25Index, list[Vector[float]]] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def model(self) -> str:
        return self.cache.embedder.name

    async def aclose(self) -> None:
        await self.cache.embedder.aclose()

    async def warm(self, indexes: Sequence[BM25Index]) -> None:
        """Embeds the passages now (at start) rather than on the first question; a failure
        is logged and left to the first question to retry."""
        try:
            for index in indexes:
                await self._vectors(index)
        except EmbeddingError as exc:
            logger.warning("lookup: could not embed the knowledge folders at start (%s)", exc)

    async def search(
        self, indexes: Sequence[BM25Index], query: str, *, limit: int, first: int | None = None
    ) -> list[tuple[int, Hit]]:
        """``search_together``'s answer, ranked by both: ``first``'s hits still come first."""
        try:
            dense = await self._dense(indexes, query)
        except EmbeddingError as exc:
            logger.warning(
                "lookup: the embeddings endpoint failed (%s); BM25 alone for this query", exc
            )
            return search_together(indexes, query, limit=limit, first=first)
        lexical = search_together(indexes, query, limit=self.pool)
        hits: dict[tuple[int, Passage], tuple[int, Hit]] = {}
        for where, hit in lexical:
            hits.setdefault((where, hit.passage), (where, hit))
        for where, doc_id in dense:
            hit = indexes[where].hit(doc_id, 0.0)
            hits.setdefault((where, hit.passage), (where, hit))
        fused = fuse(
            [
                [(where, hit.passage) for where, hit in lexical],
                [(where, indexes[where].passages[doc_id]) for where, doc_id in dense],
            ],
            k=self.k,
        )
        fused.sort(key=lambda pair: pair[0][0] != first)  # stable: files first, each by score
        return [
            (hits[key][0], Hit(hits[key][1].passage, score, hits[key][1].lead))
            for key, score in fused[:limit]
        ]

    async def _dense(self, indexes: Sequence[BM25Index], query: str) -> list[tuple[int, int]]:
        places = [
            (where, doc_id) for where, index in enumerate(indexes) for doc_id in range(len(index))
        ]
        if not places:
            return []
        vectors = [vector for index in indexes for vector in await self._vectors(index)]
        (wanted,) = await self.cache.embedder.embed([query])
        if len(vectors) > THREAD_VECTORS:
            best = await asyncio.to_thread(cosine_ranking, wanted, vectors, limit=self.pool)
        else:
            best = cosine_ranking(wanted, vectors, limit=self.pool)
        return [places[position] for position in best]

    async def _vectors(self, index: BM25Index) -> list[Vector[float]]:
        vectors = self._by_index.get(index)
        if vectors is None:
            vectors = await self.cache.vectors([index.text_of(i) for i in range(len(index))])
            self._by_index[index] = vectors
        return vectors
