"""Reading one mapping of a YAML file with messages that name the file and the key path."""

from __future__ import annotations

from typing import Any

from tpu_trainer.errors import ConfigError


class YamlNode:
    """One mapping of the file, with its key path, for precise messages."""

    def __init__(self, source: str, path: str, data: object) -> None:
        self.source, self.path = source, path
        if not isinstance(data, dict):
            raise self.error("", f"expected a mapping, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    def error(self, key: str, problem: str) -> ConfigError:
        where = ".".join(p for p in (self.path, key) if p) or "(top level)"
        return ConfigError(
            f"{self.source}: {where}: {problem}",
            fix="see docs/fake-cloud.md for the scenario file format",
        )

    def only(self, *keys: str) -> None:
        unknown = sorted(set(self.data) - set(keys))
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(keys)})")

    def child(self, key: str) -> YamlNode | None:
        value = self.data.get(key)
        return None if value is None else YamlNode(self.source, self._sub(key), value)

    def _sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def items(self, key: str) -> list[YamlNode]:
        value = self.data.get(key) or []
        if not isinstance(value, list):
            raise self.error(key, "expected a list")
        return [YamlNode(self.source, f"{self._sub(key)}[{i}]", v) for i, v in enumerate(value)]

    def text(self, key: str, default: str | None = None, *, choices: tuple[str, ...] = ()) -> str:
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "required")
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        if choices and value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def maybe_text(self, key: str) -> str | None:
        return None if self.data.get(key) is None else self.text(key)

    def number(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected a whole number, got {value!r}")
        if value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def seconds(self, key: str) -> float:
        value = self.data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.error(key, f"expected seconds (a number >= 0), got {value!r}")
        return float(value)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "expected a list of names")
        return tuple(value)
