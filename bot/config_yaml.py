"""The YAML loader of config files: PyYAML's safe loader, refusing duplicate keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

__all__ = ["unique_key_loader"]


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
