"""gcloud's ``--format``: ``json``, ``yaml``, ``value(...)``, ``table(...)`` and the defaults."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

_SPEC = re.compile(r"^(?P<kind>[a-z]+)(?:\[(?P<attrs>[^\]]*)\])?(?:\((?P<keys>.*)\))?$", re.S)


class FormatError(ValueError):
    """A ``--format`` the fake does not understand (gcloud has many more)."""


def _lookup(obj: Any, key: str) -> Any:
    key = key.strip()
    basename = key.endswith(".basename()")
    if basename:
        key = key[: -len(".basename()")]
    value: Any = obj
    for part in key.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            value = None
    if basename and isinstance(value, str):
        value = value.rstrip("/").rsplit("/", 1)[-1]
    return value


def _keys(spec: str) -> list[str]:
    """Keys of a projection (``name``, ``version:label=NODE_VERSION``...), attributes kept."""
    keys, depth, current = [], 0, ""
    for ch in spec:
        if ch == "," and depth == 0:
            keys.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    keys.append(current)
    return [k.strip() for k in keys if k.strip()]


def _key(column: str) -> str:
    return column.split(":", 1)[0].strip()


def _label(column: str) -> str:
    """The column's ``label=`` attribute, else its last key part in upper snake case."""
    for attr in column.split(":")[1:]:
        name, _, value = attr.partition("=")
        if name.strip() == "label":
            return value.strip()
    last = _key(column).replace(".basename()", "").rsplit(".", 1)[-1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", last).upper()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _table(rows: Sequence[Any], columns: list[str]) -> str:
    headers = [_label(c) for c in columns]
    cells = [[_cell(_lookup(row, _key(c))) for c in columns] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = [headers, *cells] if rows else []
    return "".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in lines
    )


def render(data: Any, fmt: str | None, *, many: bool, default_keys: list[str]) -> str:
    """``data`` (one resource, or a list when ``many``) as gcloud prints it with ``--format``.

    Without a format a describe prints YAML and a list prints a table of ``default_keys``.
    """
    rows: list[Any] = list(data) if many else [data]
    if fmt is None:
        if many:
            return _table(rows, default_keys)
        return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)
    m = _SPEC.match(fmt.strip())
    if m is None:
        raise FormatError(fmt)
    kind, keys = m.group("kind"), _keys(m.group("keys") or "")
    if kind == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    if kind == "yaml":
        docs = rows if many else [data]
        return "---\n".join(yaml.safe_dump(d, sort_keys=True) for d in docs)
    if kind == "value":
        keys = keys or default_keys
        return "".join("\t".join(_cell(_lookup(r, _key(k))) for k in keys) + "\n" for r in rows)
    if kind == "table":
        return _table(rows, keys or default_keys)
    if kind in ("none", "disable"):
        return ""
    raise FormatError(fmt)


def matches(obj: Any, terms: Sequence[tuple[str, str, str]]) -> bool:
    """Whether ``obj`` passes every (key, operator, value) filter term.

    ``=`` compares whole values (or a URL's last part), ``!=`` the opposite, ``:`` looks for a
    substring, ``~`` searches a regular expression.
    """
    for key, op, wanted in terms:
        value = _cell(_lookup(obj, key))
        base = value.rstrip("/").rsplit("/", 1)[-1]
        if op == "=" and wanted not in (value, base):
            return False
        if op == "!=" and wanted in (value, base):
            return False
        if op == ":" and wanted.lower() not in value.lower():
            return False
        if op == "~" and re.search(wanted, value) is None:
            return False
    return True
