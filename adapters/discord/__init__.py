"""Discord adapter: a discord.py bot that shows each run live in one edited message.

- ``render``: pure rendering of a run's state into message payloads (unit-tested offline).
- ``access``: who may ask where, and the per-user cooldown (pure).
- ``surface``: the live-message Surface on discord.py messages, and 429 observation.
- ``cog``: the mention listener, ``/ask``, ``/reset``, ``/trace`` and the Stop button.
- ``client``: the bot itself, with connections opened in ``setup_hook``.

Imports ``core`` and ``adapters.live`` only; the application hands in the agent, stores and
settings (``bot/serve_discord.py``).
"""
