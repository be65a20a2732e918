"""Voice notes as questions, for every surface: checked, downloaded and transcribed once
the question is admitted (its budget, cooldown and access passed), before its run starts.

::

    the surface's Incoming (Telegram voice/audio/video_note, a Discord voice message or
    audio attachment, a Slack audio file or clip), with the length the platform gave
      -> Hearing.hear(files): its size (``files.max_bytes``, and the 25 MB an upload may be)
         and its length (``stt.max_seconds``) checked before anything is downloaded or sent;
         downloaded by the surface's ``Downloader``; transcribed (``core.speech``)
      -> Heard (the transcript, the length, the model, the cost), or the one line the asker
         is told (no ``stt.model``, too long, too large, the endpoint failed, silence)

The transcript is the question (after the message's own text, when it has some): the live
message shows it first (``words.heard_line``), the trace keeps it with the note's length and
model (``Trace.voice``), and its cost joins the run's (``Trace.cost_usd``: the footer,
``usage`` and the daily budgets). A note's audio is never stored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from adapters import words
from core.files import MB, FileRefused, Incoming, is_audio, size_text
from core.speech import MAX_UPLOAD, Heard, Speaker, SpeechError, Transcriber, is_silence

__all__ = ["Hearing", "Voiced"]

log = logging.getLogger(__name__)


class Voiced(Protocol):
    """What a question needs to be heard: the pipeline's ``Ask``."""

    @property
    def ident(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def files(self) -> Sequence[Incoming]: ...


Q = TypeVar("Q", bound=Voiced)


@dataclass(slots=True)
class Hearing:
    """``stt.*``: the transcriber (None: voice notes get ``VOICE_OFF``) and its limits."""

    transcriber: Transcriber | None = None
    max_seconds: float = 300.0
    max_bytes: int = 10 * MB
    speaker: Speaker | None = None
    """Speaks the answers to voice questions (``tts.*``; Telegram sends them as voice
    messages); None: answers are text only."""
    _heard: dict[str, Heard] = field(default_factory=dict)
    """What each admitted ask was heard as, by its ident, until ``apply`` takes it."""

    @staticmethod
    def wanted(files: Sequence[Incoming]) -> bool:
        """Whether the question carries a voice note (it may then have no text)."""
        return any(is_audio(f) for f in files)

    async def check(self, ask: Voiced) -> str | None:
        """Hears the ask's voice notes (kept for ``apply``); None when there were none or
        they were heard, else the line the asker is told."""
        notes = [f for f in ask.files if is_audio(f)]
        if not notes:
            return None
        result = await self.hear(notes)
        if isinstance(result, str):
            return result
        self._heard[ask.ident] = result
        return None

    def apply(self, ask: Q) -> Q:
        """``ask`` with its transcript as the question (after its own text), and the
        ``Heard`` on it; unchanged when it had no voice note."""
        heard = self._heard.pop(ask.ident, None)
        if heard is None:
            return ask
        question = f"{ask.question}\n\n{heard.text}" if ask.question.strip() else heard.text
        return replace(ask, question=question, heard=heard)  # type: ignore[type-var]

    def forget(self, ident: str) -> None:
        """The ask was refused after it was heard."""
        self._heard.pop(ident, None)

    async def hear(self, notes: Sequence[Incoming]) -> Heard | str:
        """The notes, transcribed and joined in order; or the first refusal's line."""
        if self.transcriber is None:
            return words.VOICE_OFF
        heard: list[Heard] = []
        for note in notes:
            one = await self._hear_one(self.transcriber, note)
            if isinstance(one, str):
                return one
            heard.append(one)
        return _joined(heard)

    async def _hear_one(self, transcriber: Transcriber, note: Incoming) -> Heard | str:
        refused = self._refusal(note.size, note.seconds)
        if refused is not None:
            return refused
        try:
            data = await note.fetch()
        except FileRefused as exc:
            return f"⚠️ {exc}"
        refused = self._refusal(len(data), note.seconds)
        if refused is not None:
            return refused
        try:
            heard = await transcriber.transcribe(
                _upload_name(note), data, content_type=note.content_type, seconds=note.seconds
            )
        except SpeechError as exc:
            log.warning("voice note not transcribed (%s)", exc)
            return words.voice_failed(exc.kind)
        if is_silence(heard.text, heard.seconds):
            return words.VOICE_SILENT
        return heard

    def _refusal(self, size: int | None, seconds: float | None) -> str | None:
        limit = min(self.max_bytes, MAX_UPLOAD)
        if size is not None and size > limit:
            return words.voice_too_big(size_text(limit))
        if seconds is not None and seconds > self.max_seconds:
            return words.voice_too_long(seconds, self.max_seconds)
        return None


def _joined(heard: Sequence[Heard]) -> Heard:
    if len(heard) == 1:
        return heard[0]
    lengths = [h.seconds for h in heard]
    costs = [h.cost_usd for h in heard]
    return Heard(
        "\n\n".join(h.text for h in heard),
        None if None in lengths else sum(s for s in lengths if s is not None),
        heard[0].model,
        None if None in costs else sum(c for c in costs if c is not None),
    )


_SPEECH_SUFFIXES = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
}


def _upload_name(note: Incoming) -> str:
    """The name the endpoint sees: OpenAI tells formats by the extension, so a note whose
    name has none it knows gets the one its content type says (``.opus`` is Ogg)."""
    name = note.name.rsplit("/", 1)[-1] or "voice"
    stem, dot, suffix = name.rpartition(".")
    if dot and suffix.lower() in (
        "oga",
        "ogg",
        "mp3",
        "m4a",
        "wav",
        "webm",
        "flac",
        "mp4",
        "mpga",
        "mpeg",
    ):
        return name
    if dot and suffix.lower() == "opus":
        return f"{stem}.ogg"
    kind = (note.content_type or "").split(";")[0].strip().lower()
    return (stem if dot else name) + _SPEECH_SUFFIXES.get(kind, ".ogg")
