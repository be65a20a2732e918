"""Every config key from the environment: ``REACTBOT_<SECTION>__<KEY>`` (issue 30), so a
container needs no mounted file; the value is JSON when it parses, else text, and is checked
like the file's, with errors naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config import Config, ConfigError, env_key_variable, load_config


def error_for(env: dict[str, str], path: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, env)
    return str(info.value)


def test_a_variable_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("web: {enabled: false, link_ttl: 600}\nops: {host: 127.0.0.1}\n")

    config = load_config(path, {"REACTBOT_WEB__ENABLED": "true", "REACTBOT_OPS__HOST": "0.0.0.0"})

    assert config.web.enabled is True
    assert config.web.link_ttl == 600  # the file's other keys stay
    assert config.ops.host == "0.0.0.0"


def test_a_variable_sets_a_key_without_a_file() -> None:
    config = load_config(None, {"REACTBOT_SLACK__MODE": "http", "REACTBOT_SLACK__PORT": "3100"})
    assert (config.slack.mode, config.slack.port) == ("http", 3100)


def test_nested_keys_take_one_double_underscore_per_level(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("tools:\n  search: {max_results: 2, timeout: 4}\n")
    env = {
        "REACTBOT_TOOLS__SEARCH__MAX_RESULTS": "5",
        "REACTBOT_AGENT__APPROVAL__TIMEOUT": "30",
        "REACTBOT_MODELS__BIG__NAME": "gpt-4.1",
    }

    config = load_config(path, env)

    assert config.tools.search.max_results == 5
    assert config.tools.search.timeout == 4
    assert config.agent.approval.timeout == 30
    assert config.models["big"].name == "gpt-4.1"


def test_a_top_level_key_that_is_not_a_section_has_no_double_underscore() -> None:
    config = load_config(None, {"REACTBOT_LOG_LEVEL": "debug", "REACTBOT_LOG_FORMAT": "json"})
    assert (config.log_level, config.log_format) == ("DEBUG", "json")


def test_lists_and_mappings_are_json() -> None:
    env = {
        "REACTBOT_DISCORD__ALLOWED_CHANNELS": '["1", "2"]',
        "REACTBOT_AGENT__APPROVAL__TOOLS": '["calculate"]',
        "REACTBOT_MODEL__PRICE": '{"input": 0.15, "output": 0.6}',
    }

    config = load_config(None, env)

    assert config.discord.allowed_channels == (1, 2)
    assert config.agent.approval.tools == ("calculate",)
    assert config.model.price is not None and config.model.price.output == 0.6


def test_a_value_that_is_not_json_is_its_text_and_text_keys_keep_numbers_as_text() -> None:
    env = {"REACTBOT_OPS__HOST": "0.0.0.0", "REACTBOT_MODEL__NAME": "1106"}
    config = load_config(None, env)
    assert config.ops.host == "0.0.0.0"
    assert config.model.name == "1106"


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("web: {enabled: true}\n")
    assert load_config(path, {"REACTBOT_WEB__ENABLED": " "}).web.enabled is True


def test_the_general_form_wins_over_the_older_variable() -> None:
    env = {"REACTBOT_MODEL": "from-old", "REACTBOT_MODEL__NAME": "from-new"}
    assert load_config(None, env).model.name == "from-new"


def test_other_reactbot_variables_are_not_config_keys() -> None:
    env = {"REACTBOT_CONFIG": "", "REACTBOT_WAIT_FOR_CONFIG": "1", "REACTBOT_LINK_SECRET": "x"}
    assert load_config(None, env).model_dump(exclude={"secrets"}) == Config().model_dump(
        exclude={"secrets"}
    )


def test_a_misspelt_key_names_the_variable_and_the_right_one() -> None:
    message = error_for({"REACTBOT_DISCORD__ALOWED_CHANNELS": '["1"]'})
    assert message == (
        "config error: discord.alowed_channels: unknown key (did you mean "
        "REACTBOT_DISCORD__ALLOWED_CHANNELS?). It comes from the "
        "REACTBOT_DISCORD__ALOWED_CHANNELS environment variable: fix or unset it."
    )


def test_a_misspelt_section_names_the_variable_and_the_right_one() -> None:
    message = error_for({"REACTBOT_DISOCRD__LAYOUT": "text"})
    assert "disocrd: unknown key (did you mean REACTBOT_DISCORD__LAYOUT?)" in message
    assert "REACTBOT_DISOCRD__LAYOUT environment variable" in message


def test_an_invalid_value_names_the_key_and_the_variable() -> None:
    message = error_for({"REACTBOT_OPS__PORT": "99999"})
    assert message == (
        "config error: ops.port: must be between 1 and 65535 (got 99999). "
        "It comes from the REACTBOT_OPS__PORT environment variable: fix or unset it."
    )


def test_an_invalid_list_item_names_the_variable() -> None:
    message = error_for({"REACTBOT_DISCORD__ALLOWED_CHANNELS": '["general"]'})
    assert message.startswith("config error: discord.allowed_channels[0]: must be a whole number")
    assert "REACTBOT_DISCORD__ALLOWED_CHANNELS environment variable" in message


def test_a_section_check_names_the_variable_that_set_its_keys() -> None:
    message = error_for({"REACTBOT_DISCORD__SHARD_IDS": "[3]"})
    assert "discord.shard_ids needs discord.shard_count" in message
    assert "REACTBOT_DISCORD__SHARD_IDS environment variable" in message


def test_a_key_under_a_plain_value_of_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model: {price: [1, 2]}\n")
    message = error_for({"REACTBOT_MODEL__PRICE__INPUT": "1"}, path)
    assert message == (
        "config error: REACTBOT_MODEL__PRICE__INPUT: cannot set model.price.input: "
        "model.price in config.yaml is a list, not a mapping of keys"
    )


@pytest.mark.parametrize(
    ("var", "value", "instead"),
    [
        ("REACTBOT_SLACK__BOT_TOKEN", "xoxb-1-2", "SLACK_BOT_TOKEN"),
        ("REACTBOT_MODEL__API_KEY", "sk-123", "OPENAI_API_KEY"),
        ("REACTBOT_SECRETS__DISCORD_TOKEN", "abc", "DISCORD_TOKEN"),
        ("REACTBOT_WEB__LINK_SECRET", "abc", "REACTBOT_LINK_SECRET"),
    ],
)
def test_secrets_are_refused_with_their_own_variable(var: str, value: str, instead: str) -> None:
    message = error_for({var: value})
    assert message.startswith(f"config error: {var}: secrets are not read from REACTBOT_")
    assert f"set the {instead} environment variable instead" in message
    assert value not in message


def test_a_secret_inside_a_json_value_is_refused() -> None:
    message = error_for({"REACTBOT_MODELS": '{"big": {"name": "x", "api_key": "sk-live-1"}}'})
    assert "REACTBOT_MODELS: secrets are not read" in message
    assert "models.big.api_key" in message
    assert "sk-live-1" not in message


def test_two_underscores_with_nothing_between_them_is_not_a_key() -> None:
    message = error_for({"REACTBOT_OPS____HOST": "x"})
    assert message.startswith("config error: REACTBOT_OPS____HOST: not a config key")


@given(st.lists(st.from_regex(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", fullmatch=True), min_size=1))
def test_a_key_path_and_its_variable_name_map_both_ways(path: list[str]) -> None:
    var = env_key_variable(path)
    assert var.startswith("REACTBOT_")
    assert var.removeprefix("REACTBOT_").lower().split("__") == path
