"""A scripted, OpenAI-compatible speech server for tests: ``POST /v1/audio/transcriptions``
and ``POST /v1/audio/speech`` over real HTTP, refusing what OpenAI's API refuses, the way it
refuses it.

What it checks before the script is consulted (each as OpenAI answers it)::

    no or wrong ``Authorization: Bearer``     401 invalid_api_key
    a body over 25 MB (26,214,400 bytes)      413 "Maximum content size limit (26214400)
                                              exceeded (N bytes read)", type server_error
    not multipart/form-data, no ``file``      400 invalid_request_error
    or no ``model``
    a file name whose extension is none of    400 "Invalid file format. Supported formats:
    flac m4a mp3 mp4 mpeg mpga oga ogg wav    [...]"
    webm
    bytes that are no such audio (by their    400 "Audio file might be corrupted or
    magic, not the name)                      unsupported"
    a ``response_format`` the model lacks     400 (gpt-4o-transcribe: json and text only)

Then each request takes the next scripted answer: ``transcript(text, ...)`` (answered in the
request's ``response_format``: json, text or verbose_json), ``error(status, ...)`` (429 with
``retry-after``), or ``hear(fn)`` (the text is ``fn(file bytes)``: real audio transcribed by
a real recogniser). A request that finds the script empty gets a 500 and is remembered;
``assert_complete()`` fails on it and on answers never used.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import BodyPartReader, web

from tests.fakes.local_server import serve_locally

__all__ = ["FakeSpeech", "Upload"]

LIMIT = 26_214_400
FORMATS = ["flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"]
"""In the order OpenAI's error message lists them."""
WHISPER_FORMATS = frozenset({"json", "text", "srt", "verbose_json", "vtt"})
GPT4O_FORMATS = frozenset({"json", "text"})


def _magic_ok(suffix: str, data: bytes) -> bool:
    """Whether ``data`` starts like a file of that kind (the API decodes it; we sniff)."""
    if suffix in ("ogg", "oga"):
        return data.startswith(b"OggS")
    if suffix == "wav":
        return data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    if suffix == "flac":
        return data.startswith(b"fLaC")
    if suffix in ("mp3", "mpga", "mpeg"):
        return data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] >= 0xE0)
    if suffix in ("mp4", "m4a"):
        return data[4:8] == b"ftyp"
    if suffix == "webm":
        return data.startswith(b"\x1a\x45\xdf\xa3")
    return False


@dataclass(frozen=True, slots=True)
class Upload:
    """One transcription request as the server read it."""

    model: str
    filename: str
    content_type: str
    data: bytes
    fields: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Transcript:
    text: str
    seconds: float | None
    delay: float


@dataclass(frozen=True, slots=True)
class _Error:
    status: int
    message: str
    type: str
    code: str | None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Hear:
    fn: Callable[[bytes], str]


@dataclass(frozen=True, slots=True)
class _Speech:
    audio: bytes
    delay: float


Scripted = _Transcript | _Error | _Hear | _Speech


class FakeSpeech:
    """The scripted server; ``async with FakeSpeech() as fake``."""

    def __init__(self, *, api_key: str = "sk-speech", model: str = "whisper-1") -> None:
        self.api_key = api_key
        self.model = model
        self.uploads: list[Upload] = []
        """Every transcription request that passed the checks, in arrival order."""
        self.speech_requests: list[dict[str, Any]] = []
        self.refused: list[int] = []
        """The status of every request refused before the script (401, 413, 400)."""
        self._script: deque[Scripted] = deque()
        self._unexpected = 0
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- scripting -------------------------------------------------------------------------

    def transcript(self, text: str, *, seconds: float | None = None, delay: float = 0.0) -> Self:
        """The next transcription says ``text``; ``seconds``: the note's length, reported as
        ``usage`` (and as verbose_json's ``duration``); ``delay``: seconds before answering."""
        self._script.append(_Transcript(text, seconds, delay))
        return self

    def hear(self, fn: Callable[[bytes], str]) -> Self:
        """The next transcription is ``fn`` of the uploaded bytes (run in a thread)."""
        self._script.append(_Hear(fn))
        return self

    def speech(self, audio: bytes, *, delay: float = 0.0) -> Self:
        """The next ``/audio/speech`` answers ``audio``."""
        self._script.append(_Speech(audio, delay))
        return self

    def error(
        self,
        status: int,
        message: str = "",
        *,
        type: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> Self:
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        default = {429: "requests", 401: "invalid_request_error"}.get(status, "server_error")
        self._script.append(
            _Error(status, message or f"fake error {status}", type or default, code, headers)
        )
        return self

    # -- inspection ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeSpeech is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    def assert_complete(self) -> None:
        problems = []
        if self._script:
            problems.append(f"{len(self._script)} scripted answer(s) never requested")
        if self._unexpected:
            problems.append(f"{self._unexpected} request(s) arrived with the script empty")
        assert not problems, "FakeSpeech: " + "; ".join(problems)

    # -- the wire --------------------------------------------------------------------------

    async def _transcriptions(self, request: web.Request) -> web.StreamResponse:
        refused = self._authorised(request) or await self._sized(request)
        if refused is not None:
            return refused
        if not request.content_type.startswith("multipart/form-data"):
            return self._refuse(400, "Invalid Content-Type header: expected multipart/form-data")
        upload, problem = await self._read_form(request)
        if upload is None:
            return self._refuse(400, problem)
        suffix = upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
        if suffix not in FORMATS:
            return self._refuse(400, f"Invalid file format. Supported formats: {FORMATS}")
        if not _magic_ok(suffix, upload.data):
            return self._refuse(400, "Audio file might be corrupted or unsupported")
        wanted = upload.fields.get("response_format", "json")
        formats = GPT4O_FORMATS if upload.model.startswith("gpt-4o") else WHISPER_FORMATS
        if wanted not in formats:
            return self._refuse(
                400,
                f"response_format '{wanted}' is not compatible with model '{upload.model}'. "
                f"Use one of {sorted(formats)}.",
            )
        self.uploads.append(upload)
        if not self._script:
            self._unexpected += 1
            return self._refuse(500, "FakeSpeech: no scripted answer", status_only=True)
        step = self._script.popleft()
        if isinstance(step, _Error):
            return _error(step)
        if isinstance(step, _Hear):
            text = await asyncio.to_thread(step.fn, upload.data)
            return _transcription(wanted, text, None)
        if isinstance(step, _Transcript):
            if step.delay:
                await asyncio.sleep(step.delay)
            return _transcription(wanted, step.text, step.seconds)
        self._unexpected += 1
        return self._refuse(500, "FakeSpeech: a speech answer queued for a transcription")

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        refused = self._authorised(request)
        if refused is not None:
            return refused
        try:
            body = await request.json()
        except ValueError:
            return self._refuse(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict) or not body.get("input") or not body.get("model"):
            return self._refuse(400, "you must provide a model and an input parameter")
        if len(str(body["input"])) > 4096:
            return self._refuse(400, "string too long: 'input' is at most 4096 characters")
        self.speech_requests.append(body)
        step = self._script.popleft() if self._script else None
        if isinstance(step, _Error):
            return _error(step)
        if not isinstance(step, _Speech):
            self._unexpected += 1
            return self._refuse(500, "FakeSpeech: no scripted speech")
        if step.delay:
            await asyncio.sleep(step.delay)
        kind = {"opus": "audio/ogg", "mp3": "audio/mpeg", "wav": "audio/wav"}
        return web.Response(
            body=step.audio, content_type=kind.get(body.get("response_format", "mp3"), "audio/mpeg")
        )

    def _authorised(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        self.refused.append(401)
        return web.json_response(
            _body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
            status=401,
        )

    async def _sized(self, request: web.Request) -> web.Response | None:
        length = request.content_length
        if length is None or length <= LIMIT:
            return None
        # Read to the end, as OpenAI's front does ("N bytes read"), so the client sees the
        # answer instead of a connection cut mid-upload.
        while await request.content.readany():
            pass
        self.refused.append(413)
        message = f"Maximum content size limit ({LIMIT}) exceeded ({length} bytes read)"
        return web.json_response(_body(message, "server_error", None), status=413)

    async def _read_form(self, request: web.Request) -> tuple[Upload | None, str]:
        reader = await request.multipart()
        fields: dict[str, str] = {}
        file: tuple[str, str, bytes] | None = None
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                return None, "nested multipart is not accepted"
            if part.name == "file" and part.filename:
                data = bytes(await part.read())
                file = (part.filename, part.headers.get("Content-Type", ""), data)
            elif part.name:
                fields[part.name] = await part.text()
        if file is None:
            return None, "you must provide a file parameter"
        model = fields.pop("model", "")
        if not model:
            return None, "you must provide a model parameter"
        return Upload(model, file[0], file[1], file[2], fields), ""

    def _refuse(self, status: int, message: str, *, status_only: bool = False) -> web.Response:
        if not status_only:
            self.refused.append(status)
        return web.json_response(_body(message, "invalid_request_error", None), status=status)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=LIMIT * 2)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        app.router.add_post("/v1/audio/speech", self._speech)
        self._runner, self._port = await serve_locally(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _body(message: str, type: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def _error(step: _Error) -> web.Response:
    return web.json_response(
        _body(step.message, step.type, step.code), status=step.status, headers=step.headers
    )


def _transcription(wanted: str, text: str, seconds: float | None) -> web.Response:
    if wanted == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    usage = {"type": "duration", "seconds": seconds} if seconds is not None else None
    if wanted == "verbose_json":
        duration = seconds or 0.0
        segment = {
            "id": 0,
            "seek": 0,
            "start": 0.0,
            "end": duration,
            "text": " " + text,
            "tokens": [],
            "temperature": 0.0,
            "avg_logprob": -0.3,
            "compression_ratio": 1.0,
            "no_speech_prob": 0.01,
        }
        body: dict[str, Any] = {
            "task": "transcribe",
            "language": "english",
            "duration": duration,
            "text": text,
            "segments": [segment] if text else [],
        }
    else:
        body = {"text": text}
    if usage is not None:
        body["usage"] = usage
    return web.Response(text=json.dumps(body), content_type="application/json")
