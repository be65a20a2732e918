"""A channel's model, persona and tools as admins set them: validated, stored by name, and
turned into one run's choices; a catalogue entry's key comes only from the environment."""

from __future__ import annotations

import logging

import pytest

from adapters.channels import ChannelChoices, ChoiceError
from bot.config import ConfigError, load_config
from core.errors import StoreUnavailable
from core.prompt import PERSONA_CHARS
from core.scripted import ScriptedModel
from core.stores import InMemoryChannelSettings
from core.tools import FunctionTool, ToolRegistry


def tools(*names: str) -> ToolRegistry:
    registry = ToolRegistry()
    for name in names:

        async def run(arg: str) -> str:
            return arg

        registry.add(FunctionTool(name, run, f"{name}.", f"{name}[x]"))
    return registry


def choices() -> ChannelChoices:
    catalogue = {"big": ScriptedModel([], model_name="gpt-big"), "small": ScriptedModel([])}
    return ChannelChoices(
        InMemoryChannelSettings(), catalogue, tools("search", "calculate"), default_model="d"
    )


async def test_without_settings_a_run_takes_the_defaults() -> None:
    choice = await choices().for_run("discord:1")
    assert (choice.model, choice.tools, choice.persona) == (None, None, "")


async def test_a_model_is_picked_from_the_catalogue_and_default_resets_it() -> None:
    c = choices()
    with pytest.raises(ChoiceError, match=r"no model named 'huge'\. Models: `big`, `small`"):
        await c.set_model("k", "huge")
    assert await c.set_model("k", " big ") == "This channel now uses `big`."
    assert (await c.for_run("k")).model is c.catalogue["big"]
    assert (await c.for_run("k", model="small")).model is c.catalogue["small"], "asker's pick"
    with pytest.raises(ChoiceError):
        await c.for_run("k", model="nope")
    assert await c.set_model("k", "DEFAULT") == "This channel now uses the default model."
    assert (await c.for_run("k")).model is None
    assert c.matching("SM") == ["small"]


async def test_a_model_taken_out_of_the_config_falls_back_to_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = choices()
    await c.set_model("k", "big")
    del c.catalogue["big"]  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        assert (await c.for_run("k")).model is None
    assert "not in the catalogue" in caplog.text


async def test_tools_toggle_and_a_run_gets_only_those_on() -> None:
    c = choices()
    assert await c.toggle_tool("k", "SEARCH") == "`search` is now off in this channel."
    run_tools = (await c.for_run("k")).tools
    assert run_tools is not None and run_tools.names == ["calculate"]
    assert await c.toggle_tool("k", "search") == "`search` is now on in this channel."
    assert (await c.for_run("k")).tools is None
    with pytest.raises(ChoiceError, match=r"no tool named 'shell'\. Tools: search, calculate"):
        await c.toggle_tool("k", "shell")


async def test_the_persona_is_bounded_and_empty_clears_it() -> None:
    c = choices()
    with pytest.raises(ChoiceError, match="limit is 2,000"):
        await c.set_persona("k", "x" * (PERSONA_CHARS + 1))
    assert (
        await c.set_persona("k", "  Be brief.  ") == "This channel's persona is set (9 characters)."
    )
    assert (await c.for_run("k")).persona == "Be brief."
    assert await c.set_persona("k", "   ") == "This channel's persona is cleared."
    assert await c.persona("k") == ""


async def test_settings_describe_each_choice_in_a_line() -> None:
    c = choices()
    assert await c.describe("k", "full") == [
        "Verbosity: full (the default)",
        "Model: d",
        "Tools: search, calculate",
        "Persona: none",
    ]
    await c.set_model("k", "big")
    await c.toggle_tool("k", "calculate")
    await c.set_persona("k", "Be brief.")
    assert (await c.describe("k", "full"))[1:] == [
        "Model: big (set by an admin)",
        "Tools: search (off here: calculate)",
        "Persona: 9 characters",
    ]
    assert await c.tools_line("k") == "Tools: search (off here: calculate)"
    assert c.matching_tools("CALC") == ["calculate"]
    await c.settings.put("k", "verbosity", "answer")
    assert (await c.describe("k", "full"))[0] == "Verbosity: answer (set by an admin)"
    assert (await c.for_run("k")).verbosity == "answer"
    await c.settings.put("k", "verbosity", "loud")  # not a level: the platform's default
    assert (await c.for_run("k")).verbosity is None


class Down(InMemoryChannelSettings):
    async def get(self, channel: str) -> dict[str, str]:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to read the channel's settings")

    async def put(self, channel: str, name: str, value: str | None) -> None:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to save the channel's settings")


async def test_with_the_store_away_runs_take_defaults_and_changes_say_so() -> None:
    c = ChannelChoices(Down(), {"big": ScriptedModel([])}, tools("search"))
    assert (await c.for_run("k")).model is None
    with pytest.raises(StoreUnavailable):
        await c.set_model("k", "big")


def test_the_catalogue_reads_keys_from_the_variables_it_names(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "config.yaml"
    path.write_text(
        "models:\n"
        "  fast: {name: gpt-fast, base_url: 'http://127.0.0.1:9/v1', api_key_env: FAST_KEY}\n"
        "  local: {name: llama, vision: true}\n"
    )
    config = load_config(path, {"FAST_KEY": "sk-fast-secret-1234567890"})
    assert config.models["fast"].name == "gpt-fast" and config.models["local"].vision
    assert "sk-fast-secret-1234567890" in config.secrets.values(), "redacted from logs"
    path.write_text("models:\n  default: {name: x}\n")
    with pytest.raises(ConfigError, match="cannot name a model"):
        load_config(path, {})
    path.write_text("models:\n  m: {name: x, api_key_env: sk-abcdefghijklmnopqrstuvwx}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path, {})
    assert "sk-abcdefghijklmnopqrstuvwx" not in str(refused.value), "a pasted key is not echoed"
