"""The project's exception tree.

    ReactbotError
    ├── ModelError                 the model endpoint failed (after retries)
    │   ├── ModelTimeout           no chunk arrived within the per-call timeout
    │   ├── ModelRateLimited       HTTP 429 that outlasted the retries
    │   ├── ModelAuthError         401/403: key missing or wrong
    │   ├── ModelBadRequest        400/404/422: model name, context length, parameters
    │   │   └── ResponseFormatRefused  the endpoint does not take this ``response_format``
    │   └── ModelUnavailable       5xx or connection errors that outlasted the retries
    │       └── MalformedChunk     core.openai_reply: a streamed chunk that is no JSON object
    ├── ToolError                  a tool could not do what was asked (becomes an Observation)
    │   └── ToolTimeout
    ├── StoreUnavailable           Redis (or another store) cannot be reached
    │   └── StoreFull              ... or answers but refuses writes: out of memory (OOM)
    ├── FileRefused                core.files: a file is not indexed (one line naming it)
    ├── ConfigError                bot.config: the config is invalid (names the key and fix)
    ├── ChoiceError                adapters.channels: an unknown model or tool was chosen
    ├── EditDeferred               adapters.live: a platform write to try again later
    │   └── RateLimited            ... after the platform's Retry-After
    ├── EditRejected               adapters.live: the platform refused the payload itself
    ├── ReplayError                bot.trace_commands: ``trace replay`` cannot start
    └── OpsError                   bot.ops: the ops endpoint cannot start

Classes outside core derive from ``ReactbotError`` in their own modules (core imports no
adapter or bot module); a test walks every module and checks that no exception class the
project defines stands outside this tree.

Third-party errors are mapped at the boundary with ``raise ... from exc``; messages are written
for the person reading the chat, and never contain secrets.
"""

from __future__ import annotations


class ReactbotError(Exception):
    """Base of every error this project raises on purpose."""


class ModelError(ReactbotError):
    """The model endpoint failed; ``str(error)`` is safe to show to users."""


class ModelTimeout(ModelError):
    pass


class ModelRateLimited(ModelError):
    pass


class ModelAuthError(ModelError):
    pass


class ModelBadRequest(ModelError):
    pass


class ResponseFormatRefused(ModelBadRequest):
    """The endpoint refused the requested ``response_format`` (``json_schema`` or
    ``json_object``); the agent falls back to a plainer one."""


class ModelUnavailable(ModelError):
    pass


class MalformedChunk(ModelUnavailable, ValueError):
    """A streamed chunk that is not a JSON object (a ``ValueError`` too, like the JSON
    parser's own errors, so one handler maps both to the provider's malformed stream)."""


class ToolError(ReactbotError):
    """A tool failed in a way the model should hear about; the message becomes the Observation."""


class ToolTimeout(ToolError):
    pass


class StoreUnavailable(ReactbotError):
    """A history, trace or lock store cannot be reached right now."""


class StoreFull(StoreUnavailable):
    """The store answers but refused a write for want of memory (Redis ``OOM``, with
    ``maxmemory-policy noeviction``): reads still work, so nothing waits for it to return."""
