"""``stt.*`` and ``tts.*`` made into the process's voice services (``adapters.voice``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from adapters.voice import Hearing
from bot.config import Config
from bot.config_voice import SttConfig, TtsConfig

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
    if stt.model is None:
        return hearing
    key = speech_key(config, stt)
    if key is None and stt.base_url is None:
        variable = stt.api_key_env or "OPENAI_API_KEY"
        notes.append(f"Voice notes are not heard: set {variable} for stt.model {stt.model}.")
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
    return hearing
