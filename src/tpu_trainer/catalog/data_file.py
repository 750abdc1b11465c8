"""Packaged YAML data files, read once and checked field by field.

Every problem names the file and the key it is under (``tpu_kinds.yaml: tpu_kinds.v7:
device_kind must be a non-empty string``), so a bad edit to a data file fails its unit test
instead of a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import cast

import yaml


class DataFileError(ValueError):
    """A packaged data file is malformed (names the file, the key and what is wrong)."""


def read_packaged(package: str, name: str) -> str:
    """The text of data file ``name`` inside ``package`` (a dotted package name)."""
    return resources.files(package).joinpath(name).read_text("utf-8")


def parse_mapping(text: str, name: str) -> Mapping[str, object]:
    """A YAML document that must be a mapping."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader either way
    except yaml.YAMLError as e:
        raise DataFileError(f"{name}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise DataFileError(f"{name}: expected a mapping of keys")
    return cast(Mapping[str, object], doc)


def mapping(where: str, raw: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = raw.get(key)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise DataFileError(f"{where}: {key} must be a mapping with string keys")
    return cast(Mapping[str, object], value)


def text(where: str, raw: Mapping[str, object], key: str, *, empty: bool = False) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise DataFileError(f"{where}: {key} must be a {'' if empty else 'non-empty '}string")
    return value


def strings(where: str, raw: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DataFileError(f"{where}: {key} must be a list of non-empty strings")
    return tuple(cast(list[str], value))


def unique_strings(where: str, raw: Mapping[str, object], key: str) -> tuple[str, ...]:
    """A list of non-empty strings, none of them twice, in the file's order."""
    found = strings(where, raw, key)
    doubled = sorted({v for v in found if found.count(v) > 1})
    if doubled:
        raise DataFileError(f"{where}: {key} lists {', '.join(doubled)} twice")
    return found


def string_set(where: str, raw: Mapping[str, object], key: str) -> frozenset[str]:
    return frozenset(unique_strings(where, raw, key))


def text_map(where: str, raw: Mapping[str, object], key: str) -> dict[str, str]:
    """A mapping of strings to strings ('' allowed as a value)."""
    found = mapping(where, raw, key)
    return {k: text(f"{where}: {key}", found, k, empty=True) for k in found}


def integer(where: str, raw: Mapping[str, object], key: str, *, minimum: int = 0) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DataFileError(f"{where}: {key} must be an integer ≥ {minimum}")
    return value


def number(where: str, raw: Mapping[str, object], key: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataFileError(f"{where}: {key} must be a number")
    return float(value)


def flag(where: str, raw: Mapping[str, object], key: str, *, default: bool | None = None) -> bool:
    """A true/false value (``default`` when the key is absent and a default is given)."""
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise DataFileError(f"{where}: {key} must be true or false")
    return value


def optional_text(where: str, raw: Mapping[str, object], key: str) -> str | None:
    """A non-empty string, or null (the key must be written either way)."""
    if key in raw and raw[key] is None:
        return None
    return text(where, raw, key)


def optional_number(where: str, raw: Mapping[str, object], key: str) -> float | None:
    """A number, or null (the key must be written either way)."""
    if key in raw and raw[key] is None:
        return None
    return number(where, raw, key)


def only_keys(where: str, raw: Mapping[str, object], allowed: frozenset[str]) -> None:
    """Refuse keys outside ``allowed`` (a misspelt key would otherwise be ignored)."""
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise DataFileError(
            f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )
