"""bot.config: defaults, environment overrides, error messages, secrets, the example file."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from bot.config import (
    DEPRECATED_KEYS,
    SECRET_ENV_VARS,
    AgentConfig,
    Config,
    ConfigError,
    Secrets,
    SlackConfig,
    load_config,
    resolve_config_path,
)
from bot.platforms import platform

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"

SECRET_ENV = {
    "OPENAI_API_KEY": "sk-test-OPENAI-0001",
    "TAVILY_API_KEY": "tvly-test-TAVILY-0002",
    "DISCORD_TOKEN": "discord-test-TOKEN-0003",
    "SLACK_BOT_TOKEN": "xoxb-test-BOT-0004",
    "SLACK_APP_TOKEN": "xapp-test-APP-0005",
    "SLACK_SIGNING_SECRET": "signing-test-SECRET-0006",
    "REACTBOT_LINK_SECRET": "link-test-SECRET-0007",
}


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_for(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env or {})
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Defaults and the file


def test_no_file_and_empty_env_gives_the_embedded_defaults() -> None:
    config = load_config(None, {})

    assert config == Config()
    assert config.model.name == ""
    assert config.model.request_timeout == 60
    assert config.agent.max_steps == 8
    assert config.agent.deadline == 180
    assert config.tools.search.max_results == 3
    assert config.tools.lookup.path is None
    assert config.redis.url is None
    assert config.redis.prefix == "reactbot:"
    assert config.discord.edit_interval == 1.2
    assert config.discord.allowed_users == ()
    assert config.slack.mode == "socket"
    assert config.slack.port == 3000
    assert config.log_level == "INFO"
    assert config.secrets == Secrets()
    assert not config.model_configured
    assert not config.search_enabled
    assert not platform("discord").enabled(config)
    assert not platform("slack").enabled(config)


def _sections(model: BaseModel, path: str = "config") -> Iterator[tuple[str, BaseModel]]:
    yield path, model
    for name in type(model).model_fields:
        value = getattr(model, name)
        for index, item in enumerate(value if isinstance(value, tuple) else (value,)):
            if isinstance(item, BaseModel):
                yield from _sections(item, f"{path}.{name}[{index}]")


def test_the_defaults_built_without_validation_are_what_validation_gives(
    tmp_path: Path,
) -> None:
    """With no file and no key set, load_config builds the embedded defaults without
    validating (no validator is built: start-up); a file naming one section at its defaults
    goes through validation. Both give the same sections, each with the same keys set, and
    each section is what validating its set keys gives."""
    env = {**SECRET_ENV, "PATH": "/usr/bin"}
    built = load_config(None, env)
    validated = load_config(write(tmp_path, "agent: {}\n"), env)
    assert built.agent == validated.agent == AgentConfig.model_validate({})
    assert built == validated.model_copy(update={"agent": built.agent})
    built_sections, validated_sections = dict(_sections(built)), dict(_sections(validated))
    assert built_sections.keys() == validated_sections.keys()
    assert len(built_sections) > 20  # every section, nested ones and the Slack prompts too
    for where, section in built_sections.items():
        given = {name: getattr(section, name) for name in section.model_fields_set}
        assert type(section).model_validate(given) == section, where
        if where not in ("config", "config.agent[0]"):
            assert section.model_fields_set == validated_sections[where].model_fields_set, where
    secrets = Secrets.model_validate({f: env[v] for f, v in SECRET_ENV_VARS.items() if v in env})
    assert built.secrets == secrets and secrets.openai_api_key is not None
    assert built.secrets.model_fields_set == secrets.model_fields_set | {"mcp", "models"}


def test_no_validator_is_built_for_the_embedded_defaults() -> None:
    """The start-up cost of the config is its classes, not their validators."""
    code = (
        "import sys\n"
        "from bot.config import Config, load_config\n"
        "config = load_config(None, {})\n"
        "assert config.agent.max_steps == 8\n"
        "assert not Config.__pydantic_complete__\n"
        "assert 'pydantic.plugin._loader' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "# nothing yet\n"), {}) == Config()


def test_a_section_with_every_key_commented_out_means_its_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "discord:\n  # allow_dms: false\ntools:\n  search:\n")
    assert load_config(path, {}) == Config()


def test_file_values_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "model: {name: deepseek-chat, temperature: 0.3}\n"
        "agent: {max_steps: 12}\n"
        "discord: {allowed_channels: [123, '456'], allow_dms: false}\n"
        "slack: {mode: http, allowed_users: [U1]}\n"
        "log_level: debug\n",
    )
    config = load_config(path, {})

    assert config.model.name == "deepseek-chat"
    assert config.model.temperature == 0.3
    assert config.agent.max_steps == 12
    assert config.discord.allowed_channels == (123, 456)
    assert config.discord.allow_dms is False
    assert config.slack.mode == "http"
    assert config.slack.allowed_users == ("U1",)
    assert config.log_level == "DEBUG"
    assert config.model_configured


def test_the_path_comes_from_reactbot_config_when_not_given(tmp_path: Path) -> None:
    path = write(tmp_path, "agent: {max_steps: 3}\n")
    other = write(tmp_path, "agent: {max_steps: 4}\n", name="other.yaml")

    assert load_config(None, {"REACTBOT_CONFIG": str(path)}).agent.max_steps == 3
    assert load_config(other, {"REACTBOT_CONFIG": str(path)}).agent.max_steps == 4
    assert resolve_config_path(None, {}) is None
    assert resolve_config_path(None, {"REACTBOT_CONFIG": ""}) is None


def test_a_relative_lookup_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "tools: {lookup: {path: notes}}\n"), {})
    assert config.tools.lookup.path == tmp_path / "notes"

    absolute = load_config(write(tmp_path, f"tools: {{lookup: {{path: {tmp_path}}}}}\n"), {})
    assert absolute.tools.lookup.path == tmp_path


def test_lookup_paths_are_a_list_of_folders_with_the_old_path_after_them(tmp_path: Path) -> None:
    text = "tools: {lookup: {paths: [handbook, /srv/kb, handbook], path: notes}}\n"
    config = load_config(write(tmp_path, text), {})
    assert config.tools.lookup.paths == (
        tmp_path / "handbook",
        Path("/srv/kb"),
        tmp_path / "handbook",
    )
    assert config.tools.lookup.folders == (
        tmp_path / "handbook",
        Path("/srv/kb"),
        tmp_path / "notes",
    )
    assert load_config(None, {}).tools.lookup.folders == ()
    from_env = load_config(None, {"REACTBOT_TOOLS__LOOKUP__PATHS": '["/a", "/b"]'})
    assert from_env.tools.lookup.folders == (Path("/a"), Path("/b"))


def test_config_is_frozen() -> None:
    config = load_config(None, {})
    with pytest.raises(ValidationError):
        config.agent.max_steps = 3


# --------------------------------------------------------------------------------------------
# Environment


def test_environment_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "model: {name: from-file, base_url: 'http://file:1/v1'}\n"
        "redis: {url: 'redis://file:6379/0'}\n",
    )
    env = {
        "REACTBOT_MODEL": "qwen-plus",
        "OPENAI_BASE_URL": "https://dashscope.example/v1",
        "REDIS_URL": "redis://env:6379/1",
    }
    config = load_config(path, env)

    assert config.model.name == "qwen-plus"
    assert config.model.base_url == "https://dashscope.example/v1"
    assert config.redis.url == "redis://env:6379/1"


def test_environment_overrides_apply_without_a_file() -> None:
    config = load_config(None, {"REACTBOT_MODEL": "llama3.1", "REDIS_URL": "unix:///tmp/r.sock"})
    assert config.model.name == "llama3.1"
    assert config.model_configured
    assert config.redis.url == "unix:///tmp/r.sock"


def test_empty_environment_values_count_as_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {name: from-file}\n")
    env = dict.fromkeys([*SECRET_ENV, "REACTBOT_MODEL", "OPENAI_BASE_URL", "REDIS_URL"], "")

    config = load_config(path, env)

    assert config.model.name == "from-file"
    assert config.secrets == Secrets()


def test_secrets_come_from_the_environment() -> None:
    config = load_config(None, SECRET_ENV)
    secrets = config.secrets

    assert secrets.openai_api_key is not None
    assert secrets.openai_api_key.get_secret_value() == SECRET_ENV["OPENAI_API_KEY"]
    assert secrets.slack_signing_secret is not None
    assert secrets.slack_signing_secret.get_secret_value() == SECRET_ENV["SLACK_SIGNING_SECRET"]
    assert config.search_enabled
    assert platform("discord").enabled(config)
    assert platform("slack").enabled(config)


@pytest.mark.parametrize(
    ("mode", "env_names", "enabled"),
    [
        ("socket", ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"], True),
        ("socket", ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"], False),
        ("socket", ["SLACK_APP_TOKEN"], False),
        ("http", ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"], True),
        ("http", ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"], False),
        ("http", ["SLACK_SIGNING_SECRET"], False),
    ],
)
def test_slack_enabled_needs_the_tokens_of_its_mode(
    tmp_path: Path, mode: str, env_names: list[str], enabled: bool
) -> None:
    env = {name: SECRET_ENV[name] for name in env_names}
    config = load_config(write(tmp_path, f"slack: {{mode: {mode}}}\n"), env)
    assert platform("slack").enabled(config) is enabled


def test_search_is_enabled_only_with_a_key_and_when_not_switched_off(tmp_path: Path) -> None:
    key = {"TAVILY_API_KEY": SECRET_ENV["TAVILY_API_KEY"]}
    assert not load_config(None, {}).search_enabled
    assert load_config(None, key).search_enabled
    off = write(tmp_path, "tools: {search: {enabled: false}}\n")
    assert not load_config(off, key).search_enabled


# --------------------------------------------------------------------------------------------
# Error messages


def test_out_of_range_names_the_key_the_range_and_the_default(tmp_path: Path) -> None:
    message = error_for(tmp_path, "agent:\n  max_steps: 0\n")
    assert message == (
        "config error: agent.max_steps: must be between 1 and 50 (got 0). "
        "Fix it in config.yaml or remove the key to use the default (8)."
    )


def test_unknown_key_suggests_the_closest_one(tmp_path: Path) -> None:
    message = error_for(tmp_path, "discord:\n  edti_interval: 2\n")
    assert message == (
        "config error: discord.edti_interval: unknown key (did you mean 'edit_interval'?)"
    )


def test_unknown_key_without_a_close_match_lists_the_known_keys(tmp_path: Path) -> None:
    message = error_for(tmp_path, "webhooks: {}\n")
    assert message.startswith("config error: webhooks: unknown key (known keys: model, agent")
    assert "secrets" not in message


def test_discord_layout_is_components_unless_set_to_text(tmp_path: Path) -> None:
    assert load_config(None, {}).discord.layout == "components"
    config = tmp_path / "c.yaml"
    config.write_text("discord:\n  layout: text\n")
    assert load_config(config, {}).discord.layout == "text"
    message = error_for(tmp_path, "discord:\n  layout: embeds\n")
    assert message.startswith(
        "config error: discord.layout: must be 'components' or 'text' (got 'embeds')"
    )


def test_slack_mode_must_be_socket_or_http(tmp_path: Path) -> None:
    message = error_for(tmp_path, "slack:\n  mode: websocket\n")
    assert message.startswith(
        "config error: slack.mode: must be 'socket' or 'http' (got 'websocket')"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model: {request_timeout: 0}", "model.request_timeout: must be greater than 0"),
        ("agent: {tool_timeout: -1}", "agent.tool_timeout: must be greater than 0"),
        ("discord: {edit_interval: 0.1}", "discord.edit_interval: must be between 0.2 and 60"),
        ("slack: {port: 70000}", "slack.port: must be between 1 and 65535 (got 70000)"),
        ("slack: {port: http}", "slack.port: must be a whole number (got 'http')"),
        ("model: {base_url: 'localhost:8000'}", "model.base_url: must start with http://"),
        ("discord: {api_base_url: 'ws://x'}", "discord.api_base_url: must start with http://"),
        ("tools: {search: {api_base_url: x}}", "tools.search.api_base_url: must start with"),
        ("redis: {url: 'http://r:6379'}", "redis.url: must start with redis://, rediss://"),
        ("discord: {allowed_users: [1, x]}", "discord.allowed_users[1]: must be a whole number"),
        ("discord: {allowed_roles: [-5]}", "discord.allowed_roles: Discord ids are positive"),
        ("slack: {use_native_streaming: maybe}", "slack.use_native_streaming: must be true or"),
        ("slack: {streaming: live}", "slack.streaming: must be 'auto', 'native' or 'update'"),
        ("agent: 5", "agent: must be a mapping of keys (got 5). Fix it in config.yaml or"),
        ("log_level: loud", "log_level: must be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or"),
    ],
)
def test_wrong_values_name_the_key_and_what_is_expected(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert error_for(tmp_path, text + "\n").startswith("config error: " + expected)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    message = error_for(tmp_path, "agent: {max_steps: 99}\nslack: {prot: 1}\n")
    lines = message.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("config error: ") for line in lines)
    assert "agent.max_steps" in lines[0]
    assert "slack.prot: unknown key (did you mean 'port'?)" in lines[1]


def test_an_invalid_environment_override_points_at_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"OPENAI_BASE_URL": "api.example.com"})
    message = str(info.value)
    assert message.startswith("config error: model.base_url: must start with http://")
    assert "OPENAI_BASE_URL environment variable" in message


def test_invalid_yaml_names_the_file_and_the_line(tmp_path: Path) -> None:
    message = error_for(tmp_path, "agent:\n  max_steps: 3\n  tool_timeout: [1,\nslack: {}\n")
    assert re.match(r"config error: .*config\.yaml line \d+, column \d+: invalid YAML: ", message)


def test_a_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    message = error_for(tmp_path, "agent:\n  max_steps: 3\n  max_steps: 4\n")
    assert "config.yaml line 3, column 3: invalid YAML: duplicate key 'max_steps'" in message


def test_the_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    message = error_for(tmp_path, "- model\n- agent\n")
    assert "config.yaml: the top level must be a mapping of sections (got a list)" in message


def test_a_missing_or_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: file not found"):
        load_config(tmp_path / "missing.yaml", {})
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(None, {"REACTBOT_CONFIG": str(tmp_path)})


@pytest.mark.parametrize(
    ("text", "key", "variable"),
    [
        ("model: {api_key: VALUE-123}", "model.api_key", "OPENAI_API_KEY"),
        ("tools: {search: {api_key: VALUE-123}}", "tools.search.api_key", "TAVILY_API_KEY"),
        ("discord: {token: VALUE-123}", "discord.token", "DISCORD_TOKEN"),
        ("slack: {bot_token: VALUE-123}", "slack.bot_token", "SLACK_BOT_TOKEN"),
        ("slack: {app_token: VALUE-123}", "slack.app_token", "SLACK_APP_TOKEN"),
        ("slack: {signing_secret: VALUE-123}", "slack.signing_secret", "SLACK_SIGNING_SECRET"),
        ("discord_token: VALUE-123", "discord_token", "DISCORD_TOKEN"),
        ("secrets: {openai_api_key: VALUE-123}", "secrets", None),
        ("extra: [{password: VALUE-123}]", "extra[0].password", None),
    ],
)
def test_secret_keys_in_the_file_are_refused(
    tmp_path: Path, text: str, key: str, variable: str | None
) -> None:
    message = error_for(tmp_path, text + "\n")
    assert message.startswith(f"config error: {key}: secrets are not read from the config file")
    if variable is not None:
        assert f"remove the key and set the {variable} environment variable instead" in message
    else:
        assert all(name in message for name in SECRET_ENV)
    assert "VALUE-123" not in message


def test_history_token_budget_is_not_mistaken_for_a_secret(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "agent: {history_token_budget: 4000}\n"), {})
    assert config.agent.history_token_budget == 4000


# --------------------------------------------------------------------------------------------
# MCP servers


MCP_SERVERS = """\
tools:
  mcp:
    timeout: 5
    servers:
      - name: files
        command: npx
        args: [-y, "@modelcontextprotocol/server-filesystem", "."]
        cwd: work
        env_from: [FILES_TOKEN]
        tools: [read_file]
        approval: false
      - name: remote
        url: https://mcp.example.com/mcp
        headers_from: {Authorization: REMOTE_AUTH, X-Api-Key: REMOTE_KEY}
      - name: old
        enabled: false
        command: old-server
"""


def test_mcp_servers_are_read_with_their_variables_from_the_environment(tmp_path: Path) -> None:
    env = {"FILES_TOKEN": "files-secret-1", "REMOTE_AUTH": "Bearer remote-secret-2"}
    config = load_config(write(tmp_path, MCP_SERVERS), env)
    mcp = config.tools.mcp
    files, remote, off = mcp.servers
    assert mcp.timeout == 5 and [s.name for s in mcp.enabled] == ["files", "remote"]
    assert files.transport == "stdio" and files.args[0] == "-y"
    assert files.cwd == tmp_path / "work"  # relative to the config file, like lookup.path
    assert files.tools == ("read_file",) and files.approval is False
    assert remote.transport == "http" and remote.tools is None and remote.approval is None
    assert remote.variables == ("REMOTE_AUTH", "REMOTE_KEY")
    assert not off.enabled
    secrets = config.secrets.mcp
    assert {k: v.get_secret_value() for k, v in secrets.items()} == env  # REMOTE_KEY: unset
    assert "files-secret-1" in config.secrets.values()
    assert "files-secret-1" not in repr(config) + str(config.model_dump())


def test_mcp_has_no_servers_and_a_30_second_timeout_by_default() -> None:
    mcp = load_config(None, {}).tools.mcp
    assert mcp.servers == () and mcp.timeout == 30


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "{name: a, command: x, url: 'http://h'}",
            "tools.mcp.servers[0]: give either command (a server run over stdio) or url "
            "(Streamable HTTP), not both and not neither. Fix this entry in config.yaml.",
        ),
        ("{command: x}", "tools.mcp.servers[0].name: is required. Add it in config.yaml."),
        ("{name: 'a b', command: x}", "tools.mcp.servers[0].name: must be 1 to 32 letters"),
        (
            "{name: a, comand: x}",
            "tools.mcp.servers[0].comand: unknown key (did you mean 'command'?)",
        ),
        ("{name: a, url: 'http://h', args: [x]}", "args apply to a command, not to a url"),
        ("{name: a, command: x, headers_from: {A: B}}", "headers_from applies to a url"),
        ("{name: a, url: 'ftp://h'}", "tools.mcp.servers[0].url: must start with http://"),
        (
            "{name: a, command: x, env_from: ['NOT A NAME']}",
            "item 0 is not an environment variable",
        ),
        ("{name: a, url: 'http://h', headers_from: {'Bad Header': B}}", "is not an HTTP header"),
        ("{name: a, command: x, approval: maybe}", "servers[0].approval: must be true or false"),
    ],
)
def test_a_wrong_mcp_server_entry_is_named_with_the_fix(
    tmp_path: Path, entry: str, expected: str
) -> None:
    message = error_for(tmp_path, f"tools:\n  mcp:\n    servers:\n      - {entry}\n")
    assert expected in message, message


def test_a_server_named_off_is_told_to_quote_it(tmp_path: Path) -> None:
    message = error_for(tmp_path, "tools: {mcp: {servers: [{name: off, command: x}]}}\n")
    assert "servers[0].name: must be a string (got False); YAML reads" in message
    assert "quote it" in message


def test_mcp_server_names_must_differ(tmp_path: Path) -> None:
    text = "tools: {mcp: {servers: [{name: gh, command: x}, {name: GH, url: 'http://h'}]}}\n"
    assert "two servers are named 'GH'" in error_for(tmp_path, text)


@pytest.mark.parametrize(
    "entry",
    [
        "{name: a, url: 'http://h', headers_from: {Authorization: ghp_0123456789abcdef}}",
        "{name: a, command: x, env_from: [sk-proj-0123456789abcdef]}",
    ],
)
def test_a_secret_written_where_a_variable_name_belongs_is_refused_unshown(
    tmp_path: Path, entry: str
) -> None:
    message = error_for(tmp_path, f"tools:\n  mcp:\n    servers:\n      - {entry}\n")
    assert "looks like a secret itself" in message
    assert "0123456789abcdef" not in message


def test_a_header_named_like_a_secret_key_is_a_name_not_a_secret(tmp_path: Path) -> None:
    text = "tools: {mcp: {servers: [{name: a, url: 'http://h', headers_from: {X-Api-Key: K}}]}}\n"
    config = load_config(write(tmp_path, text), {"K": "key-value-123"})
    assert config.tools.mcp.servers[0].headers_from == {"X-Api-Key": "K"}


def test_a_secret_key_in_an_mcp_entry_points_to_env_from_and_headers_from(tmp_path: Path) -> None:
    text = "tools: {mcp: {servers: [{name: a, command: x, token: VALUE-123}]}}\n"
    message = error_for(tmp_path, text)
    assert message.startswith("config error: tools.mcp.servers[0].token: secrets are not read")
    assert "env_from" in message and "headers_from" in message and "VALUE-123" not in message


# --------------------------------------------------------------------------------------------
# Secrets never show


def test_secrets_never_appear_in_repr_str_or_dumps() -> None:
    config = load_config(None, {**SECRET_ENV, "REDIS_URL": "redis://:hunter2pass@db:6379/0"})
    shown = [
        repr(config),
        str(config),
        repr(config.secrets),
        str(config.secrets),
        config.model_dump_json(),
        repr(config.redis),
        f"{config}",
    ]
    for text in shown:
        for value in [*SECRET_ENV.values(), "hunter2pass"]:
            assert value not in text
    assert config.redis.url == "redis://:hunter2pass@db:6379/0"


def test_secrets_never_appear_in_error_messages(tmp_path: Path) -> None:
    # A secret pasted into the wrong key, and token-shaped values: the message shows no value.
    text = (
        f"model: {{base_url: {SECRET_ENV['DISCORD_TOKEN']}}}\n"
        "slack: {api_base_url: xoxb-pasted-by-mistake}\n"
        "redis: {url: 'http://:hunter2pass@db'}\n"
    )
    message = error_for(tmp_path, text, env=SECRET_ENV)
    assert len(message.splitlines()) == 3
    for value in [*SECRET_ENV.values(), "xoxb-pasted-by-mistake", "hunter2pass"]:
        assert value not in message


# --------------------------------------------------------------------------------------------
# The example file stays in sync with the schema


def field_paths(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, info in model.model_fields.items():
        if model is Config and name == "secrets":
            continue
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from field_paths(annotation, f"{prefix}{name}.")
        else:
            yield prefix + name


def key_paths(data: dict[str, object], prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        if isinstance(value, dict) and value:  # an empty mapping (models: {}) is a leaf
            yield from key_paths(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def test_the_example_file_equals_the_defaults() -> None:
    assert load_config(EXAMPLE, {}) == load_config(None, {})


def test_the_example_file_sets_every_key() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    expected = set(field_paths(Config)) - set(DEPRECATED_KEYS)
    assert sorted(key_paths(raw)) == sorted(expected)


def test_every_key_in_the_example_has_a_comment_above_it() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    leaf = re.compile(r"^\s*(\w+):\s*\S")
    undocumented = [
        line.strip()
        for before, line in itertools.pairwise(lines)
        if leaf.match(line) and not before.strip().startswith("#")
    ]
    assert undocumented == []


def test_the_example_names_every_environment_variable() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    for name in [*SECRET_ENV, "REACTBOT_MODEL", "OPENAI_BASE_URL", "REDIS_URL", "REACTBOT_CONFIG"]:
        assert name in text


# --------------------------------------------------------------------------------------------
# Building by hand (for tests elsewhere)


def test_sections_can_be_built_directly_and_are_validated() -> None:
    config = Config(agent=AgentConfig(max_steps=2), slack=SlackConfig(mode="http"))
    assert config.agent.max_steps == 2
    with pytest.raises(ValidationError):
        AgentConfig(max_steps=0)


def test_no_settings_object_prints_a_secret() -> None:
    from adapters.slack.settings import SlackSettings
    from core.openai_model import OpenAIChatModel
    from core.tools.search import SearchTool

    secrets = ["xoxb-secret-bot", "signing-secret-value", "xapp-secret-app", "sk-secret-key"]
    slack = SlackSettings(bot_token=secrets[0], signing_secret=secrets[1], app_token=secrets[2])
    model = OpenAIChatModel(model="m", base_url=None, api_key=secrets[3])
    search = SearchTool(api_key="tvly-secret-search")
    config = load_config(
        None,
        {"OPENAI_API_KEY": secrets[3], "SLACK_BOT_TOKEN": secrets[0], "DISCORD_TOKEN": "d-secret"},
    )
    shown = " ".join(
        [repr(slack), str(slack), repr(model), repr(search), repr(config), str(config)]
    )
    for secret in [*secrets, "tvly-secret-search", "d-secret"]:
        assert secret not in shown


# --------------------------------------------------------------------------------------------
# slack.streaming replaces slack.use_native_streaming


def test_slack_streaming_is_auto_by_default_and_takes_its_three_values(tmp_path: Path) -> None:
    assert load_config(None, {}).slack.streaming_mode == "auto"
    for value in ("auto", "native", "update"):
        config = load_config(write(tmp_path, f"slack: {{streaming: {value}}}\n"), {})
        assert config.slack.streaming_mode == value
        assert config.slack.deprecations == []


@pytest.mark.parametrize(("old", "new"), [("true", "native"), ("false", "update")])
def test_the_old_native_streaming_key_still_works_and_says_what_replaces_it(
    tmp_path: Path, old: str, new: str
) -> None:
    config = load_config(write(tmp_path, f"slack: {{use_native_streaming: {old}}}\n"), {})
    assert config.slack.streaming_mode == new
    assert config.slack.deprecations == [
        f"slack.use_native_streaming is deprecated: write slack.streaming: {new} "
        "(auto streams natively in DMs and assistant threads)"
    ]


def test_the_old_and_the_new_streaming_key_together_are_refused(tmp_path: Path) -> None:
    message = error_for(tmp_path, "slack: {use_native_streaming: true, streaming: auto}\n")
    assert "use_native_streaming is replaced by streaming" in message


def test_at_most_four_suggested_prompts(tmp_path: Path) -> None:
    prompts = ", ".join("{title: t, message: m}" for _ in range(5))
    message = error_for(tmp_path, f"slack: {{suggested_prompts: [{prompts}]}}\n")
    assert message.startswith("config error: slack.suggested_prompts")


# The trace pages' section


def test_web_defaults_and_the_link_secret_from_the_environment() -> None:
    config = load_config(None, {"REACTBOT_LINK_SECRET": " s3cret-link-key "})
    assert config.web.enabled is False and config.web.public_url is None
    assert config.web.link_ttl == 7 * 86400
    assert config.secrets.link_secret is not None
    assert config.secrets.link_secret.get_secret_value() == "s3cret-link-key"
    assert "s3cret-link-key" not in repr(config)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("bot.example.com", "must start with http:// or https://"),
        ("https://bot.example.com/a b", "must be a plain URL"),
        ("https://bot.example.com/<x>", "must be a plain URL"),
        ("https://bot.example.com/?x=1", "must not have a query"),
        ("https://bot.example.com/#top", "must not have a query"),
        ("https:///path", "must name a host"),
    ],
)
def test_web_public_url_is_a_plain_base(tmp_path: Path, value: str, words: str) -> None:
    path = write(tmp_path, f"web:\n  public_url: '{value}'\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert str(caught.value).startswith("config error: web.public_url: ")
    assert words in str(caught.value)


def test_web_link_ttl_bounds_and_a_secret_in_the_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"web.link_ttl: must be between 60 and 31622400"):
        load_config(write(tmp_path, "web:\n  link_ttl: 5\n"), {})
    with pytest.raises(ConfigError, match="REACTBOT_LINK_SECRET"):
        load_config(write(tmp_path, "web:\n  link_secret: abc\n"), {})
    ok = load_config(
        write(tmp_path, "web:\n  enabled: true\n  public_url: https://b.example/r\n"), {}
    )
    assert ok.web.public_url == "https://b.example/r"
