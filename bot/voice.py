"""``stt.*`` and ``tts.*`` made into the process's voice services (``adapters.voice``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from adapters.voice import Hearing
from bot.config import Config
from bot.config_voice import SttConfig, TtsConfig

if TYPE_CHECKING:
    from core.speech import OpenAISpeaker

__all__ = ["build_hearing", "speech_key"]


def speech_key(config: Config, section: SttConfig | TtsConfig) -> str | None:
    """The key ``api_key_env`` names (``OPENAI_API_KEY`` when unset), or None."""
    if section.api_key_env is not None:
        secret = config.secrets.models.get(section.api_key_env)
    else:
        secret = config.secrets.openai_api_key
    return None if secret is None else secret.get_secret_value()


def build_hearing(
    config: Config, notes: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> Hearing:
    """The transcriber ``stt.model`` names, within ``stt.max_seconds`` and
    ``files.max_bytes``; without one, a ``Hearing`` that tells each voice note so."""
    stt = config.stt
    hearing = Hearing(max_seconds=stt.max_seconds, max_bytes=config.files.max_bytes)
    reached, key = _reachable(config, stt, "stt", "Voice notes are not heard", notes)
    if stt.model is None or not reached:
        return hearing
    from core.speech import OpenAITranscriber

    transcriber = OpenAITranscriber(
        stt.model,
        base_url=stt.base_url,
        api_key=key,
        price_per_minute=stt.price_per_minute,
        timeout=stt.timeout,
    )
    closers.append(transcriber.aclose)
    hearing.transcriber = transcriber
    hearing.speaker = _speaker(config, notes, closers)
    return hearing


def _speaker(
    config: Config, notes: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> OpenAISpeaker | None:
    """``tts.model``'s speaker (answers to voice questions spoken back), or None."""
    tts = config.tts
    reached, key = _reachable(config, tts, "tts", "Answers are not spoken", notes)
    if tts.model is None or not reached:
        return None
    from core.speech import OpenAISpeaker

    speaker = OpenAISpeaker(
        tts.model, voice=tts.voice, base_url=tts.base_url, api_key=key, max_chars=tts.max_chars
    )
    closers.append(speaker.aclose)
    return speaker


def _reachable(
    config: Config, section: SttConfig | TtsConfig, name: str, off: str, notes: list[str]
) -> tuple[bool, str | None]:
    """Whether the section's endpoint can be called (a key, or a ``base_url`` that may need
    none) and its key; a model named without either is said once in ``notes``."""
    if section.model is None:
        return False, None
    key = speech_key(config, section)
    if key is None and section.base_url is None:
        variable = section.api_key_env or "OPENAI_API_KEY"
        notes.append(f"{off}: set {variable} for {name}.model {section.model}.")
        return False, None
    return True, key
