"""MaxText's configuration keys per version, loaded once from ``data/maxtext_versions.yaml``
(written by ``tools/build_maxtext_keys.py``): each released version and each recipe-pinned
revision's ``base.yml`` keys with the type of their default, its model files, and the keys
renamed between versions.

The file holds the reference version (the runtime's) whole and every other version as a chain of
differences towards it; :func:`maxtext_versions` resolves the chain into whole tables.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    string_set,
    text,
)

VERSIONS_FILE = "data/maxtext_versions.yaml"
KINDS: Mapping[str, Any] = {
    "bool": False,
    "int": 0,
    "float": 0.0,
    "str": "text",
    "list": [],
    "dict": {},
    "none": None,
}
"""Each type word and a default of that type (what the type check compares a value with)."""
_HEX = re.compile(r"[0-9a-f]{7,40}")
_DESCRIBE = re.compile(r".+-\d+-g(?P<sha>[0-9a-f]{7,40})")


@dataclass(frozen=True, slots=True)
class KeyTable:
    """One MaxText version's ``base.yml`` keys (name → type word) and model file names."""

    name: str
    source: str
    """``pypi`` (a released wheel) or ``git`` (a branch, tag or commit)."""
    revision: str
    date: str
    keys: Mapping[str, str]
    models: frozenset[str]

    def defaults(self) -> dict[str, Any]:
        """A stand-in default of each key's type, in the form ``base.yml`` gives them."""
        return {key: KINDS[kind] for key, kind in self.keys.items()}

    @property
    def label(self) -> str:
        """``0.2.5`` or ``a0fceb5 (2026-03-06)``: what a message calls this version."""
        return self.name if self.source == "pypi" else f"{self.name} ({self.date})"


@dataclass(frozen=True, slots=True)
class KeyRename:
    old: str
    new: str
    after: str
    """The last version (in date order) with the old name."""
    date: str
    """The day of the commit that renamed it ("" when unknown)."""
    commit: str


@dataclass(frozen=True, slots=True)
class MaxTextVersions:
    reference: str
    tables: Mapping[str, KeyTable]
    """By name, oldest first."""
    renames: Mapping[str, KeyRename]

    def find(self, asked: str) -> KeyTable | None:
        """The table ``asked`` names: a version or pinned name, a commit (7+ hex digits, a
        prefix of a stored revision) or ``git describe`` output (``tag-N-g<sha>``)."""
        asked = asked.strip()
        asked = asked[1:] if asked.startswith("v0.") else asked
        if asked in self.tables:
            return self.tables[asked]
        described = _DESCRIBE.fullmatch(asked)
        sha = described.group("sha") if described else asked.lower()
        if not _HEX.fullmatch(sha):
            return None
        return next(
            (t for t in self.tables.values() if t.source == "git" and t.revision.startswith(sha)),
            None,
        )

    def having(self, key: str) -> tuple[KeyTable, ...]:
        """The versions whose ``base.yml`` has ``key``, oldest first."""
        return tuple(t for t in self.tables.values() if key in t.keys)


def _kinds(where: str, raw: Mapping[str, object], key: str) -> dict[str, str]:
    value = mapping(where, raw, key)
    bad = [k for k, v in value.items() if v not in KINDS]
    if bad:
        raise DataFileError(f"{where}: {key}.{bad[0]} must be one of {', '.join(KINDS)}")
    return {k: str(v) for k, v in value.items()}


def _version(where: str, raw: Mapping[str, object], name: str, near: KeyTable | None) -> KeyTable:
    keys = _kinds(where, raw, "keys") if near is None else dict(near.keys)
    models = string_set(where, raw, "models") if near is None else set(near.models)
    if near is not None:
        for key in string_set(where, raw, "removed"):
            keys.pop(key, None)
        keys |= _kinds(where, raw, "added")
        models = (models - string_set(where, raw, "models_removed")) | string_set(
            where, raw, "models_added"
        )
    return KeyTable(
        name,
        text(where, raw, "source"),
        text(where, raw, "revision"),
        text(where, raw, "date"),
        keys,
        frozenset(models),
    )


def load_versions(text_: str, name: str = VERSIONS_FILE) -> MaxTextVersions:
    """Parse and check the document, resolving every version's chain of differences."""
    doc = parse_mapping(text_, name)
    reference = text(name, doc, "reference")
    raw = mapping(name, doc, "versions")
    if reference not in raw:
        raise DataFileError(f"{name}: versions must hold the reference {reference}")
    entries = {v: mapping(f"{name}: versions", raw, v) for v in raw}
    tables: dict[str, KeyTable] = {}

    def resolve(version: str, seen: tuple[str, ...] = ()) -> KeyTable:
        if version not in tables:
            where = f"{name}: versions.{version}"
            entry = entries[version]
            near: KeyTable | None = None
            if version != reference:
                against = text(where, entry, "against")
                if against not in entries or against in seen:
                    raise DataFileError(f"{where}: against must name another version")
                near = resolve(against, (*seen, version))
            tables[version] = _version(where, entry, version, near)
        return tables[version]

    ordered = {v: resolve(v) for v in entries}
    renames: dict[str, KeyRename] = {}
    for old, value in mapping(name, doc, "renames").items():
        where = f"{name}: renames.{old}"
        if not isinstance(value, dict):
            raise DataFileError(f"{where}: must be a mapping with to and after")
        renames[old] = KeyRename(
            old,
            text(where, value, "to"),
            text(where, value, "after"),
            str(value.get("date", "")),
            str(value.get("commit", "")),
        )
    return MaxTextVersions(reference, ordered, renames)


@functools.cache
def maxtext_versions() -> MaxTextVersions:
    """The packaged tables, read and checked on first use."""
    return load_versions(read_packaged(__package__ or "", VERSIONS_FILE))
