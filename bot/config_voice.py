"""The ``stt`` and ``tts`` sections: voice notes heard through an OpenAI-compatible
``/audio/transcriptions`` endpoint, answers spoken through ``/audio/speech``.

Plain sections like ``bot.config``'s (unknown keys refused, frozen, built on first use); the
key comes from the environment variable ``api_key_env`` names, never from the file.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["SttConfig", "TtsConfig"]

_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _VoiceSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("api_key_env", check_fields=False)
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_VAR.match(value):
            raise ValueError("must be an environment variable's name, e.g. OPENAI_API_KEY")
        return value


class SttConfig(_VoiceSection):
    """Speech to text for voice notes; off while ``model`` is unset."""

    model: str | None = Field(default=None, min_length=1)
    """``whisper-1``, ``gpt-4o-transcribe``, ``whisper-large-v3`` (Groq), a local server's."""
    base_url: str | None = None
    """None: OpenAI's API (``model.base_url`` is the chat model's, not this)."""
    api_key_env: str | None = None
    """The variable holding the key; None: ``OPENAI_API_KEY`` (a local server needs none)."""
    max_seconds: float = Field(default=300.0, gt=0, le=3600)
    """Longer notes are refused before anything is sent."""
    price_per_minute: float | None = Field(default=None, ge=0, le=1000)
    """US dollars per minute of audio (whisper-1: 0.006); counted in the run's cost."""
    timeout: float = Field(default=60.0, gt=0, le=600)


class TtsConfig(_VoiceSection):
    """Answers to voice questions spoken back (Telegram); off while ``model`` is unset."""

    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    voice: str = Field(default="alloy", min_length=1)
    max_chars: int = Field(default=1500, ge=1, le=4096)
    """Longer answers are spoken up to here (``/audio/speech`` takes 4,096)."""
