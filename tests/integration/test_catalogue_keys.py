"""A catalogue entry's key (``models.NAME.api_key_env``) is the only key sent to its endpoint:
when the variable it names is unset, no key goes there, never ``OPENAI_API_KEY`` (meant for
the default endpoint); an entry naming no variable uses ``OPENAI_API_KEY``, as documented.
Checked over real HTTP with the openai SDK against the fake's recorded headers."""

from __future__ import annotations

from pathlib import Path

from bot.app import App
from bot.config import load_config
from tests.fakes.openai_server import FakeOpenAI

DEFAULT_KEY = "sk-default-0123456789abcdef"
LOCAL_KEY = "sk-local-0123456789abcdef"


async def _authorization(app: App, name: str, fake: FakeOpenAI) -> str:
    fake.reply("Thought: hi\nAction: finish[hi]")
    async for _ in app.catalogue[name].stream([{"role": "user", "content": "hi"}], stop=[]):
        pass
    return fake.request_headers[-1].get("Authorization", "")


async def test_an_entrys_named_key_goes_to_its_endpoint_and_no_other_key_does(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(model="llama") as fake:
        path = tmp_path / "config.yaml"
        path.write_text(
            "models:\n"
            f"  local: {{name: llama, base_url: '{fake.base_url}', api_key_env: LOCAL_KEY}}\n"
            f"  shared: {{name: llama, base_url: '{fake.base_url}'}}\n"
        )
        env = {"OPENAI_API_KEY": DEFAULT_KEY, "REACTBOT_MODEL": "gpt-4o"}
        app = App.create(load_config(path, env))
        try:
            sent = await _authorization(app, "local", fake)
            assert DEFAULT_KEY not in sent, "OPENAI_API_KEY went to an entry that names its own"
            assert await _authorization(app, "shared", fake) == f"Bearer {DEFAULT_KEY}"
        finally:
            await app.aclose()
        app = App.create(load_config(path, {**env, "LOCAL_KEY": LOCAL_KEY}))
        try:
            assert await _authorization(app, "local", fake) == f"Bearer {LOCAL_KEY}"
        finally:
            await app.aclose()
