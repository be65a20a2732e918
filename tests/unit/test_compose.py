"""compose.yaml, .env.example, .dockerignore and the Dockerfile: one command starts the bot
with Redis, and no secret is written in any of them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import CONFIG_PATH_ENV, ENV_OVERRIDES, SECRET_ENV_VARS, OpsConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_redis_keeps_its_data_and_says_when_it_is_healthy() -> None:
    redis = compose()["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    volume = redis["volumes"][0].split(":")[0]
    assert volume in compose()["volumes"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert redis["restart"] == "unless-stopped"


def test_redis_never_evicts_what_guards_exactly_once() -> None:
    # An evicted event claim lets a redelivered event be answered twice (issue 26).
    command = compose()["services"]["redis"]["command"]
    policy = command[command.index("--maxmemory-policy") + 1]
    assert policy == "noeviction"
    assert command[command.index("--maxmemory") + 1].endswith("mb")


def test_the_bot_waits_for_a_healthy_redis_and_restarts_unless_stopped() -> None:
    bot = compose()["services"]["bot"]
    assert bot["build"] == "."
    assert bot["env_file"] == ".env"
    assert bot["depends_on"] == {"redis": {"condition": "service_healthy"}}
    assert bot["restart"] == "unless-stopped"
    assert bot["environment"]["REDIS_URL"].endswith("redis://redis:6379/0}")


def test_the_slack_port_and_the_ops_port_are_published() -> None:
    ports = compose()["services"]["bot"]["ports"]
    targets = {str(p).rsplit(":", 1)[-1] for p in ports}
    assert targets == {"3000", "9464"}
    # metrics and readiness are for the operator: the host's loopback only
    assert "127.0.0.1:9464:9464" in ports


def test_the_dockerfile_exposes_both_ports() -> None:
    exposed = re.findall(r"^EXPOSE (.+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert exposed and set(" ".join(exposed).split()) == {"3000", "9464"}


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (str(k), *_strings(v))]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [str(node)]


SECRET_NAMES = set(SECRET_ENV_VARS.values())


def test_no_secret_value_sits_in_the_compose_file() -> None:
    data = compose()
    for service in data["services"].values():
        environment = service.get("environment", {})
        assert not SECRET_NAMES & set(environment), "secrets belong in .env"
    token_like = re.compile(r"(sk-|xox[abposr]-|xapp-|tvly-)[A-Za-z0-9]|[A-Za-z0-9_-]{40,}")
    for text in _strings(data):
        assert not token_like.search(text), text
        assert not re.search(r"://[^/\s]*:[^/\s]*@", text), "a password in a URL"


def test_env_example_lists_every_variable_the_bot_reads_without_values() -> None:
    text = (ROOT / ".env.example").read_text()
    assigned = dict(
        line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Z_]+=", line)
    )
    read = {*SECRET_ENV_VARS.values(), *ENV_OVERRIDES, CONFIG_PATH_ENV}
    assert read <= set(assigned), read - set(assigned)
    assert all(value == "" for value in assigned.values()), "no values in the example"


def test_the_image_leaves_out_secrets_and_local_state() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for entry in (".env", ".git", ".venv", "tests"):
        assert entry in ignored
    assert "!.env.example" in ignored


@pytest.mark.skipif(shutil.which("docker") is None, reason="docker is not installed")
def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    probe = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip("docker compose is not available")
    env_file = ROOT / ".env"
    created = not env_file.exists()
    if created:
        env_file.write_text("")
    try:
        result = subprocess.run(
            ["docker", "compose", "-f", str(ROOT / "compose.yaml"), "config", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
    finally:
        if created:
            env_file.unlink()
    assert result.returncode == 0, result.stderr


def test_the_ops_endpoint_takes_every_interface_only_inside_the_container() -> None:
    # Bare metal defaults to the loopback (metrics and trace pages are for the operator);
    # the container must bind 0.0.0.0 for its published port to reach the endpoint.
    assert OpsConfig().host == "127.0.0.1"
    environment = compose()["services"]["bot"]["environment"]
    ops = {var: value for var, value in environment.items() if var.startswith("REACTBOT_OPS")}
    assert load_config(None, ops).ops.host == "0.0.0.0"


def test_the_bot_waits_rather_than_restarting_in_a_loop_without_tokens() -> None:
    from bot.serve import WAIT_FOR_CONFIG_ENV, wants_to_wait

    environment = compose()["services"]["bot"]["environment"]
    assert wants_to_wait({WAIT_FOR_CONFIG_ENV: environment[WAIT_FOR_CONFIG_ENV]})
