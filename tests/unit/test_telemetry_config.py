"""The telemetry section: off by default, on with the key or the standard variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, load_config


def test_off_by_default_and_on_with_the_standard_variable() -> None:
    assert load_config(None, {}).telemetry.otlp_endpoint is None
    assert load_config(None, {}).telemetry.capture_content is False
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert load_config(None, env).telemetry.otlp_endpoint == "http://collector:4318"


def test_the_variable_wins_over_the_file(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text("telemetry:\n  otlp_endpoint: http://file:4318\n  capture_content: true\n")
    assert load_config(file, {}).telemetry.otlp_endpoint == "http://file:4318"
    config = load_config(file, {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://env.example/otel"})
    assert config.telemetry.otlp_endpoint == "https://env.example/otel"
    assert config.telemetry.capture_content is True


def test_a_malformed_endpoint_names_where_it_came_from() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"})
    message = str(caught.value)
    assert "telemetry.otlp_endpoint: must start with http:// or https://" in message
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in message
