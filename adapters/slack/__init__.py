"""Slack: `/ask`, mentions and DMs answered with a live Block Kit message and a trace thread.

- ``render``: pure renderer from ``adapters.live.RunView`` to ``chat.update`` payloads.
- ``payloads``: pure translation of raw Slack payloads into questions (no I/O).
- ``surface``: the ``adapters.live.Surface`` over ``AsyncWebClient``.
- ``bot``: the slack-bolt ``AsyncApp`` and its listeners; owns the tasks it starts.
- ``server``: HTTP mode (aiohttp, with a header guard in front of bolt) and Socket Mode.
"""
