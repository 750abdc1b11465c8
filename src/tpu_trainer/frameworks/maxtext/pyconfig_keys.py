"""What MaxText 0.2.5's pyconfig accepts beyond ``base.yml``, loaded once from
``data/pyconfig_keys.yaml``: derived values, extra fields, nested sections, nullable and
loosely typed keys, model names without a file, and the renames people get wrong."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    string_set,
    strings,
    text,
    text_map,
)

PYCONFIG_KEYS_FILE = "data/pyconfig_keys.yaml"


@dataclass(frozen=True, slots=True)
class Rename:
    targets: tuple[str, ...]
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PyconfigKeys:
    derived: Mapping[str, str]
    """``DerivedValues``: accepted names MaxText computes and overwrites → what to set instead."""
    accepted_beyond_base: frozenset[str]
    nested: Mapping[str, frozenset[str]]
    nullable: frozenset[str]
    untyped: frozenset[str]
    float_despite_int_default: frozenset[str]
    list_allowed: frozenset[str]
    string_to_list: frozenset[str]
    models_without_file: frozenset[str]
    models_instruct: frozenset[str]
    models_rejected: frozenset[str]
    renames: Mapping[str, Rename]


def load_pyconfig_keys(text_: str, name: str = PYCONFIG_KEYS_FILE) -> PyconfigKeys:
    """Parse and check the document (every key present, of the right kind)."""
    doc = parse_mapping(text_, name)
    nested = mapping(name, doc, "nested")
    renames = mapping(name, doc, "renames")
    out: dict[str, Rename] = {}
    for key, raw in renames.items():
        where = f"{name}: renames.{key}"
        if not isinstance(raw, dict):
            raise DataFileError(f"{where}: must be a mapping with targets and note")
        out[key] = Rename(strings(where, raw, "targets"), text(where, raw, "note"))
        if not out[key].targets:
            raise DataFileError(f"{where}: targets must name at least one key")
    return PyconfigKeys(
        derived=text_map(name, doc, "derived"),
        nested={k: string_set(f"{name}: nested", nested, k) for k in nested},
        renames=out,
        accepted_beyond_base=string_set(name, doc, "accepted_beyond_base"),
        nullable=string_set(name, doc, "nullable"),
        untyped=string_set(name, doc, "untyped"),
        float_despite_int_default=string_set(name, doc, "float_despite_int_default"),
        list_allowed=string_set(name, doc, "list_allowed"),
        string_to_list=string_set(name, doc, "string_to_list"),
        models_without_file=string_set(name, doc, "models_without_file"),
        models_instruct=string_set(name, doc, "models_instruct"),
        models_rejected=string_set(name, doc, "models_rejected"),
    )


@functools.cache
def pyconfig_keys() -> PyconfigKeys:
    """The packaged tables, read and checked on first use."""
    return load_pyconfig_keys(read_packaged(__package__ or "", PYCONFIG_KEYS_FILE))
