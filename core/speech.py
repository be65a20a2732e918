"""Speech to text for voice notes: one OpenAI-compatible ``POST /audio/transcriptions``
(OpenAI's whisper-1 or gpt-4o-transcribe, Groq, a local faster-whisper server) through the
real ``openai`` client, and what a transcript of silence looks like.

    Transcriber       one method, ``transcribe(name, data, ...) -> Heard``
    OpenAITranscriber the multipart upload (``response_format=json``: every compatible server
                      and model takes it; ``verbose_json`` is whisper-1's only)
    Heard             the transcript, the note's length, the model, what it cost
    OpenAISpeaker     an answer spoken: ``POST {base_url}/audio/speech``, Ogg/Opus back
    is_silence        a transcript that is only what speech models invent from silence

Errors::

    ReactbotError
    └── SpeechError         the endpoint did not transcribe; ``kind`` says why (the line a
                            person sees is worded from it by ``adapters.words``)
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from core.errors import ReactbotError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "MAX_UPLOAD",
    "Heard",
    "OpenAISpeaker",
    "OpenAITranscriber",
    "Speaker",
    "SpeechError",
    "Transcriber",
    "is_silence",
]

MAX_UPLOAD = 25 * 1024 * 1024
"""OpenAI's limit on one upload (413 past it): 25 MB."""

Why = Literal["format", "auth", "too_big", "busy", "down", "timeout", "empty"]
"""``format``: the endpoint refused the file (400); ``auth``: 401/403; ``too_big``: 413;
``busy``: 429 that outlasted the client's retries; ``down``: 5xx or no connection;
``timeout``; ``empty``: an answer with no text field."""


class SpeechError(ReactbotError):
    """The transcription endpoint failed; ``str()`` names the cause for the logs (never a
    key), ``kind`` is what the person is told."""

    def __init__(self, kind: Why, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind: Why = kind


@dataclass(frozen=True, slots=True)
class Heard:
    """A voice note, heard."""

    text: str
    seconds: float | None
    """The note's length (the platform's word, else the endpoint's); None when neither said."""
    model: str
    cost_usd: float | None = None
    """``stt.price_per_minute`` times the length; None without a price or a length."""


class Transcriber(Protocol):
    """Turns one audio file into its words."""

    @property
    def model(self) -> str: ...

    async def transcribe(
        self, name: str, data: bytes, *, content_type: str | None, seconds: float | None
    ) -> Heard: ...


class OpenAITranscriber:
    """``POST {base_url}/audio/transcriptions`` with the file as multipart form data."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        price_per_minute: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: AsyncOpenAI | None = None,
    ) -> None:
        from openai import AsyncOpenAI  # with the first voice note's setup, not at import

        self._model = model
        self.price_per_minute = price_per_minute
        # A local server needs no key, but the client refuses to start without one.
        self._client = client or AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def model(self) -> str:
        return self._model

    async def transcribe(
        self, name: str, data: bytes, *, content_type: str | None, seconds: float | None
    ) -> Heard:
        with _mapped_errors():
            result = await self._client.audio.transcriptions.create(
                model=self._model,
                file=(name, data, content_type or "application/octet-stream"),
                response_format="json",
            )
        text = getattr(result, "text", None)
        if not isinstance(text, str):
            raise SpeechError("empty", "no text in the answer")
        usage = getattr(result, "usage", None)
        billed = (
            getattr(usage, "seconds", None) if getattr(usage, "type", "") == "duration" else None
        )
        length = seconds if seconds is not None else billed
        return Heard(text.strip(), length, self._model, self.cost(length))

    def cost(self, seconds: float | None) -> float | None:
        if self.price_per_minute is None or seconds is None:
            return None
        return self.price_per_minute * max(seconds, 0.0) / 60

    async def aclose(self) -> None:
        await self._client.close()


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """The ``openai`` client's errors as ``SpeechError`` (the key is in none of them)."""
    import openai

    try:
        yield
    except openai.APITimeoutError as exc:
        raise SpeechError("timeout") from exc
    except openai.APIStatusError as exc:
        raise SpeechError(_kind_of(exc.status_code), f"HTTP {exc.status_code}") from exc
    except openai.APIError as exc:  # no connection, an unreadable answer
        raise SpeechError("down", type(exc).__name__) from exc


def _kind_of(status: int) -> Why:
    if status in (401, 403):
        return "auth"
    if status == 413:
        return "too_big"
    if status == 429:
        return "busy"
    if status >= 500:
        return "down"
    return "format"


# --- speaking -----------------------------------------------------------------------------


class Speaker(Protocol):
    """Turns an answer into a voice message's audio (Ogg/Opus)."""

    async def speak(self, text: str) -> bytes: ...


_CODE = re.compile(r"```.*?```|`[^`]*`", re.S)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"[*_#>|~`]+")


def speakable(text: str, limit: int) -> str:
    """An answer as it is read aloud: code and Markdown marks left out (a link by its words),
    at most ``limit`` characters, cut after a sentence where one ends in its second half."""
    plain = _MARKS.sub("", _LINK.sub(r"\1", _CODE.sub(" ", text)))
    plain = " ".join(plain.split())
    if len(plain) <= limit:
        return plain
    cut = plain[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[: end + 1] if end > limit // 2 else cut.rstrip() + "…"


class OpenAISpeaker:
    """``POST {base_url}/audio/speech`` (``response_format=opus``): what Telegram plays as a
    voice message."""

    def __init__(
        self,
        model: str,
        *,
        voice: str = "alloy",
        base_url: str | None = None,
        api_key: str | None = None,
        max_chars: int = 1500,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        from openai import AsyncOpenAI

        self.model, self.voice, self.max_chars = model, voice, max_chars
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
        )

    async def speak(self, text: str) -> bytes:
        said = speakable(text, self.max_chars)
        if not said:
            raise SpeechError("empty", "nothing to say")
        with _mapped_errors():
            response = await self._client.audio.speech.create(
                model=self.model, voice=self.voice, input=said, response_format="opus"
            )
        audio = response.content
        if not audio.startswith(b"OggS"):  # Telegram plays Ogg/Opus as a voice message
            raise SpeechError("format", "the answer is not Ogg audio")
        return audio

    async def aclose(self) -> None:
        await self._client.close()


# --- silence ------------------------------------------------------------------------------

_SILENCE = re.compile(
    r"""(?x)^(?:
        (?:thank\s*you|thanks)(?:\s+(?:so|very)\s+much)?(?:\s+for\s+(?:watching|listening|viewing))?
      | (?:please\s+)?(?:like\s+(?:and|&)\s+)?subscribe(?:\s+to\s+(?:my|the|our)\s+channel)?
      | (?:subtitles|captions|transcription|transcript|translated|translation)\s+by(?:\s+\S+){0,4}
      | (?:subtitles|captions)\s+(?:made|created|provided)\s+by(?:\s+\S+){0,4}
      | (?:the\s+)?amara\.org(?:\s+\S+){0,2}
      | see\s+you\s+(?:next\s+time|in\s+the\s+next\s+(?:video|one))
      | (?:bye|you|oh|so|okay|hmm+|uh+|um+|music|applause|silence|blank_audio|no\s+speech)
      | \.*
    )$""",
)


_TELLTALE = re.compile(
    r"watching|listening|viewing|subscribe|subtitles|captions|amara|transcri|translat|music|blank_audio|no speech|applause"
)
SPOKEN_WORDS_PER_SECOND = 0.75
"""Below this many words a second, a note is mostly silence (people speak about 2.5)."""


def is_silence(text: str, seconds: float | None = None) -> bool:
    """Whether ``text`` is what speech models write for a near-silent note: nothing, or only
    the phrases Whisper learned from subtitled videos ("Thank you for watching.", "Subtitles
    by the Amara.org community", "[Music]", a lone "you"). Each sentence is checked on its
    own: one real word among them, and it is speech. The short ones a person may really say
    ("Thank you.", "Bye.") count as silence only on a note too long for them (fewer than
    ``SPOKEN_WORDS_PER_SECOND``), or of unknown length."""
    plain = unicodedata.normalize("NFKC", text).casefold()
    plain = re.sub(r"[\[\]()*♪🎵…\"“”«»]", " ", plain)
    sentences = [
        " ".join(s.strip(" ,-–—'’").split()) for s in re.split(r"(?:[.!?。]+(?=\s|$)|\n)+", plain)
    ]
    sentences = [s for s in sentences if s]
    if not all(_SILENCE.match(s) for s in sentences):
        return False
    if not sentences or _TELLTALE.search(plain) or seconds is None or seconds <= 0:
        return True
    return sum(len(s.split()) for s in sentences) / seconds < SPOKEN_WORDS_PER_SECOND
