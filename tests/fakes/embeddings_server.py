"""A local fake of OpenAI's ``POST /v1/embeddings``, on a free 127.0.0.1 port, for the real
``openai`` client (``AsyncOpenAI(base_url=fake.base_url).embeddings.create``) to talk to.

The wire shape is OpenAI's: a JSON body with ``model``, ``input`` (a string or a list of
strings) and optional ``encoding_format`` (``float``, or ``base64``: little-endian float32),
``Authorization: Bearer <key>``; a reply ``{"object": "list", "data": [{"object":
"embedding", "index", "embedding"}], "model", "usage"}``; errors as ``{"error": {"message",
"type", "param", "code"}}``: 401 for a missing or wrong key, 404 for an unknown model, 400
for more than ``max_inputs`` inputs or an input over ``max_tokens`` (a token is counted as
four characters here), and scripted 429 (with ``Retry-After``), 5xx and stalls.

THE VECTORS ARE A TEST STAND-IN, NOT A MODEL: a hashed bag of words (each word lower-cased,
a plural ``s`` dropped, stopwords skipped, hashed to one of ``DIMENSIONS`` signed buckets,
weighted 1 + log tf), where the words of each group of ``SYNONYMS`` hash as one. Texts that
share words or listed synonyms land near each other; nothing else does. It proves that the
hybrid lookup is wired (passages embedded, vectors cached, rankings fused, failures fallen
back from), not that dense retrieval understands anything.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import re
import struct
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.fakes.local_server import serve_locally

DIMENSIONS = 2048
SYNONYMS: tuple[tuple[str, ...], ...] = (
    # General groups, then (after the blank line) groups written with the retrieval question
    # set (evals/retrieval.jsonl) in view: the paraphrases there land near their passages
    # because these lines say so, which is why the fake's figures prove wiring, not meaning.
    ("start", "begin", "launch", "commence", "kick"),
    ("engine", "motor", "machine"),
    ("stop", "end", "halt", "terminate", "finish", "quit"),
    ("make", "create", "build", "construct", "produce", "generate"),
    ("remove", "delete", "erase", "drop", "discard"),
    ("error", "exception", "failure", "fault", "mistake", "problem", "bug", "defect", "issue"),
    ("fast", "quick", "quickly", "rapid", "speedy", "swift"),
    ("big", "large", "huge", "enormous", "giant", "massive"),
    ("small", "little", "tiny", "miniature"),
    ("show", "display", "print", "render", "output"),
    ("get", "fetch", "retrieve", "obtain", "download", "grab", "extract"),
    ("send", "transmit", "post", "submit", "dispatch"),
    ("setting", "option", "configuration", "parameter", "preference", "config"),
    ("install", "setup", "deploy", "add"),
    ("wait", "waiting", "timeout", "pause", "sleep"),
    ("secret", "password", "credential", "token", "key"),
    ("ship", "boat", "vessel", "whaler", "craft", "ferry"),
    ("leave", "depart", "departure", "exit", "sail"),
    ("color", "colour", "colorful", "colourful", "hue", "style", "highlight"),
    ("request", "call", "query"),
    ("response", "reply", "answer"),
    ("connection", "connect", "socket", "websocket", "link"),
    ("concurrent", "parallel", "async", "asynchronous", "asyncio", "coroutine", "await"),
    ("file", "document"),
    ("test", "testing", "pytest", "check", "automated"),
    ("help", "support", "assistance"),
    ("library", "package", "dependency", "dependencie", "module"),
    ("function", "routine", "method", "procedure"),
    ("builtin", "standard", "stdlib", "built"),
    ("pretty", "nicer", "prettier", "beautiful", "elegant"),
    ("page", "sheet"),
    ("text", "word"),
    ("original", "originally"),
    ("maintain", "maintained", "upkeep", "develop", "developed", "wrote", "author"),
    ("license", "licensed", "term"),
    ("set", "store", "save", "put"),
    ("command", "operation", "instruction"),
    ("interface", "widget", "ui", "gui"),
    ("terminal", "console", "tty"),
    ("platform", "operating", "linux", "windows", "macos", "apple"),
    ("repl", "interactive", "shell", "interpreter"),
    ("inspect", "examine", "introspect"),
    ("attribute", "member"),
    ("markup", "tag", "bracket", "bbcode"),
    ("bold", "emphasis", "italic"),
    ("traceback", "stack", "backtrace", "crash", "crashe"),
    ("spinner", "spinning", "animation", "indicator"),
    ("pool", "reuse", "shared"),
    ("batch", "group", "bundle", "pipeline"),
    ("trip", "exchange", "roundtrip"),
    ("subscribe", "feed", "broadcast", "publish", "pubsub", "channel"),
    ("docker", "container", "image"),
    ("redis", "database", "datastore"),
    ("replica", "standby", "copy", "mirror"),
    ("failover", "offline", "outage", "traffic"),
    ("http2", "protocol", "revision"),
    ("underlying", "underneath", "beneath"),
    ("dataclasse", "dataclass", "record", "struct"),
    ("commercial", "paid", "purchase", "subscription", "enterprise"),
    ("ack", "acknowledge", "confirm", "receipt", "received"),
    ("listener", "handler", "callback"),
    ("ngrok", "tunnel", "expose", "publicly"),
    ("patch", "contribution", "pull"),
    ("html", "web"),
    ("thank", "thanks", "credit", "gratitude"),
    ("export", "exported"),
)
_STOPWORDS_TEXT = (
    "a an the and or of to in on at for with by from is are was were be been it its this that "
    "these those as do does did how what which who whom why when where can i you he she we they "
    "my your his her our their me him us them not no so if then than there here about into"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split(" "))
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CANON = {word: group[0] for group in SYNONYMS for word in group}


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def embed_text(text: str) -> list[float]:
    """The fake's vector of ``text`` (unit length; all zeros when no word is left)."""
    words = [_stem(w) for w in _WORD.findall(text.lower())]
    counts = Counter(_CANON.get(w, w) for w in words if w not in STOPWORDS)
    vector = [0.0] * DIMENSIONS
    for word, count in counts.items():
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % DIMENSIONS
        sign = 1.0 if digest[4] & 1 else -1.0
        vector[bucket] += sign * (1.0 + math.log(count))
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


@dataclass(frozen=True)
class Reply:
    """One scripted answer instead of vectors: an error status (with ``retry_after`` for a
    429) or a stall of ``delay`` seconds before the vectors."""

    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None

    @classmethod
    def error(cls, status: int, *, retry_after: str | None = None) -> Reply:
        return cls(status=status, retry_after=retry_after)

    @classmethod
    def slow(cls, delay: float) -> Reply:
        return cls(delay=delay)


_MESSAGES = {
    429: ("Rate limit reached for requests. Please try again in 1s.", "requests", None),
    500: ("The server had an error while processing your request.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


@dataclass
class FakeEmbeddings:
    """The fake server. ``api_key``: requests without that bearer key get a 401."""

    api_key: str | None = "sk-embed-test"
    models: tuple[str, ...] = ("text-embedding-3-small", "fake-embed")
    max_inputs: int = 2048
    max_tokens: int = 8192
    requests: list[dict[str, Any]] = field(default_factory=list)
    _script: deque[Reply] = field(default_factory=deque)
    _runner: web.AppRunner | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _port: int = 0

    def enqueue(self, *replies: Reply) -> None:
        self._script.extend(replies)

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("the fake embeddings server is not running")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def inputs(self) -> list[str]:
        """Every input embedded so far, in order."""
        return [text for body in self.requests for text in _inputs(body)]

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner, self._port = await serve_locally(app)

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _embeddings(self, request: web.Request) -> web.Response:
        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            return _error(
                401,
                "Incorrect API key provided. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            )
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        problem = self._problem(body)
        if problem is not None:
            return problem
        self.requests.append(body)
        reply = self._script.popleft() if self._script else Reply()
        if reply.delay:
            await self._sleep(reply.delay)
        if reply.status != 200:
            message, kind, code = _MESSAGES.get(reply.status, ("Error.", "server_error", None))
            headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
            return _error(reply.status, message, kind=kind, code=code, headers=headers)
        return web.json_response(_vectors(body))

    def _problem(self, body: object) -> web.Response | None:
        if not isinstance(body, dict) or "model" not in body or "input" not in body:
            return _error(400, "you must provide a model and an input parameter", param="input")
        if body["model"] not in self.models:
            return _error(
                404,
                f"The model `{str(body['model'])[:100]}` does not exist or you do not have "
                "access to it.",
                code="model_not_found",
            )
        if body.get("encoding_format", "float") not in ("float", "base64"):
            return _error(400, "encoding_format must be float or base64", param="encoding_format")
        raw = body["input"]
        if not (isinstance(raw, str) or (isinstance(raw, list) and raw)) or not all(
            isinstance(text, str) and text for text in _inputs(body)
        ):
            return _error(400, "'$.input' is invalid.", param="input")
        texts = _inputs(body)
        if len(texts) > self.max_inputs:
            return _error(
                400, f"Invalid 'input': maximum array size is {self.max_inputs}.", param="input"
            )
        longest = max(len(text) // 4 + 1 for text in texts)
        if longest > self.max_tokens:
            return _error(
                400,
                f"This model's maximum context length is {self.max_tokens} tokens, however "
                f"you requested {longest} tokens in your prompt.",
                param="input",
            )
        return None

    async def _sleep(self, delay: float) -> None:
        """Sleeps, but wakes at once when the server shuts down."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), delay)


def _inputs(body: dict[str, Any]) -> list[Any]:
    raw = body["input"]
    return [raw] if isinstance(raw, str) else list(raw)


def _vectors(body: dict[str, Any]) -> dict[str, Any]:
    texts = _inputs(body)
    data = []
    for index, text in enumerate(texts):
        vector = embed_text(text)
        shown: Any = vector
        if body.get("encoding_format") == "base64":
            shown = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": shown})
    tokens = sum(len(text) // 4 + 1 for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )
