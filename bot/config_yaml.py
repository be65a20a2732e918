"""Reading a config file: PyYAML's safe loader, refusing duplicate keys, and the file's
problems (missing, unreadable, invalid YAML, not a mapping) as ``ConfigError`` lines that
never quote the file's text (it may hold a secret)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.config_base import CONFIG_PATH_ENV, ConfigError, kind_of

if TYPE_CHECKING:
    import yaml

__all__ = ["read_yaml", "unique_key_loader"]


def unique_key_loader() -> type[yaml.SafeLoader]:
    """A SafeLoader that refuses duplicate keys instead of keeping the last one silently
    (made when a config file is read: without one, PyYAML is never imported)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_yaml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [f"{file}: file not found (check --config or {CONFIG_PATH_ENV})"]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([f"{file}: cannot read the file ({reason})"]) from None
    import yaml

    try:
        data = yaml.load(text, Loader=unique_key_loader())
    except yaml.YAMLError as exc:
        raise ConfigError([_describe_yaml_error(file, exc)]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{file}: the top level must be a mapping of sections (got {kind_of(data)})"]
        )
    return data


def _describe_yaml_error(file: Path, exc: yaml.YAMLError) -> str:
    # Only the problem and its position: the snippet PyYAML adds could quote a secret.
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "invalid YAML"
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{file}{where}: invalid YAML: {problem}"
