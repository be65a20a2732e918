"""The OpenAI-compatible chat model built from the config (``model.*``), for the app's
models, its catalogue's and a replay's ``--model``. A leaf: it imports only the config and
the transport beneath the model's client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import SecretStr

from bot.config import Config
from core.llm import ChatModel

__all__ = ["openai_model"]


def openai_model(
    config: Config,
    name: str,
    closers: list[Callable[[], Awaitable[None]]],
    *,
    base_url: str | None = None,
    key: SecretStr | None = None,
    default_key: bool = True,
) -> ChatModel:
    """``default_key``: without ``key``, use ``OPENAI_API_KEY`` (off: send no key)."""
    from bot.model_transport import READ_EVERY, AiohttpTransport
    from core.openai_model import OpenAIChatModel

    if key is None and default_key:
        key = config.secrets.openai_api_key
    model = OpenAIChatModel(
        model=name,
        base_url=base_url or config.model.base_url,
        api_key=key.get_secret_value() if key else None,
        request_timeout=config.model.request_timeout,
        max_retries=config.model.max_retries,
        temperature=config.model.temperature,
        max_tokens=config.model.max_tokens,
        transport=lambda: AiohttpTransport(read_every=READ_EVERY),
    )
    closers.append(model.aclose)
    return model
