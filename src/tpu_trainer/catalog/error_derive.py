"""Values a known error's fix is filled with, computed from what its pattern extracted.

Each ``derive`` named in ``error_families.yaml`` is a pure function here: it takes the match's
named groups and returns extra ``{placeholders}`` (a memory ratio, a sharding split, the name of a
mesh axis, the MaxText key the user probably meant). :data:`DERIVES` lists them with the names
they add, so the catalog loader can check every placeholder of a fix. The tables they read (the
mesh axes, key renames, common MaxText keys) are loaded once from ``error_derive.yaml``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    only_keys,
    parse_mapping,
    read_packaged,
    unique_strings,
)

Derive = Callable[[Mapping[str, str]], dict[str, str]]

_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"([\d.]+)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


def parse_size(text: str) -> float | None:
    """Bytes in a size as XLA prints it (``151.15G``, ``31.06M``, ``1.5GiB``), else None."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        return None
    try:
        return float(m.group(1)) * _UNIT[m.group(2).upper()]
    except ValueError:
        return None


def memory_ratio(groups: Mapping[str, str]) -> dict[str, str]:
    """``ratio``: needed ÷ available, and ``over``: how much does not fit, in GiB."""
    needed = parse_size(groups.get("needed", ""))
    available = parse_size(groups.get("available", ""))
    if not needed or not available:
        return {}
    over = (needed - available) / 2**30
    verdict = f"{over:.2f}G too much" if over > 0 else "it should fit: free memory is fragmented"
    return {"ratio": f"{needed / available:.2f}", "over": verdict}


def sharding_split(groups: Mapping[str, str]) -> dict[str, str]:
    """How to split ``parts`` devices so FSDP divides ``size``: ``fsdp`` × ``data``."""
    try:
        parts, size = int(groups["parts"]), int(groups["size"])
    except (KeyError, ValueError):
        return {}
    fsdp = math.gcd(parts, size) or 1
    shape = groups.get("shape")
    return {
        "fsdp": str(fsdp),
        "data": str(max(parts // fsdp, 1)),
        "shape_note": f" (full shape {shape})" if shape else "",
    }


def mesh_counts(groups: Mapping[str, str]) -> dict[str, str]:
    """``seen``: what the line says about devices and mesh, as a sentence (or nothing)."""
    devices, shape, expected = (groups.get(k) for k in ("devices", "shape", "expected"))
    if devices and shape:
        seen = f"The job sees {devices} devices for mesh {shape}. "
    elif devices and expected:
        seen = f"The program wants {expected} devices and the job has {devices}. "
    elif shape:
        seen = f"The mesh is {shape}. "
    elif devices:
        seen = f"The job sees {devices} devices. "
    else:
        seen = ""
    return {"seen": seen}


def flag_named(groups: Mapping[str, str]) -> dict[str, str]:
    """``flag_note``: the flag the line names, in parentheses (or nothing)."""
    flag = groups.get("flag")
    return {"flag_note": f" (`{flag}`)" if flag else ""}


DERIVE_TABLES_FILE = "error_derive.yaml"


@dataclass(frozen=True, slots=True)
class DeriveTables:
    """What ``error_derive.yaml`` holds, checked."""

    mesh_axes: tuple[str, ...]
    """MaxText 0.2.5's logical mesh axes, in its order (older releases lack the first)."""
    key_renames: Mapping[str, tuple[str, ...]]
    """Keys people pass that MaxText spells differently → MaxText's keys."""
    common_maxtext_keys: tuple[str, ...]
    """MaxText keys recipes and users set most: candidates for a misspelt key."""


def load_derive_tables(text_: str, name: str = DERIVE_TABLES_FILE) -> DeriveTables:
    """Parse and check the document (every list non-empty, no entry twice)."""
    doc = parse_mapping(text_, name)
    only_keys(name, doc, frozenset({"mesh_axes", "key_renames", "common_maxtext_keys"}))
    raw_renames = mapping(name, doc, "key_renames")
    renames = {k: unique_strings(f"{name}: key_renames", raw_renames, k) for k in raw_renames}
    lists = {key: unique_strings(name, doc, key) for key in ("mesh_axes", "common_maxtext_keys")}
    lists.update({f"key_renames.{k}": v for k, v in renames.items()})
    empty = [key for key, found in lists.items() if not found]
    if empty:
        raise DataFileError(f"{name}: {', '.join(empty)} must list at least one key")
    return DeriveTables(lists["mesh_axes"], renames, lists["common_maxtext_keys"])


_TABLES = load_derive_tables(read_packaged(__package__ or "", DERIVE_TABLES_FILE))

MESH_AXES = _TABLES.mesh_axes
KEY_RENAMES: Mapping[str, tuple[str, ...]] = _TABLES.key_renames
COMMON_MAXTEXT_KEYS = _TABLES.common_maxtext_keys


def mesh_axis(groups: Mapping[str, str]) -> dict[str, str]:
    """Names of the logical axis ``axis`` in 0.2.5's mesh order and in the older one."""
    try:
        index = int(groups["axis"])
    except (KeyError, ValueError):
        return {}
    new = MESH_AXES[index] if 0 <= index < len(MESH_AXES) else "?"
    old = MESH_AXES[index + 1] if 0 <= index + 1 < len(MESH_AXES) else "?"
    return {"axis_name": new, "old_axis_name": old}


_QUOTED_KEY = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def suggest_keys(key: str, valid: tuple[str, ...] = COMMON_MAXTEXT_KEYS) -> tuple[str, ...]:
    """MaxText keys the user probably meant by ``key``: known renames, else close spellings."""
    renamed = KEY_RENAMES.get(key) or KEY_RENAMES.get(key.lower())
    if renamed:
        return renamed
    return tuple(difflib.get_close_matches(key, valid, n=3, cutoff=0.6))


def key_suggestion(groups: Mapping[str, str]) -> dict[str, str]:
    """``suggestion``: what to write instead of the unknown ``key``.

    When the error line lists the valid fields (MaxText ≥ 0.2 does), they are the candidates;
    otherwise :data:`COMMON_MAXTEXT_KEYS`.
    """
    key = groups.get("key", "")
    listed = tuple(dict.fromkeys(_QUOTED_KEY.findall(groups.get("valid") or "")))
    valid = tuple(k for k in listed if k != key) or COMMON_MAXTEXT_KEYS
    found = suggest_keys(key, valid)
    if key == "weight_decay":
        text = "`adam_weight_decay=<v>` (AdamW) and, with opt_type=muon, `muon_weight_decay=<v>`"
    elif found:
        text = " or ".join(f"`{k}=`" for k in found)
    else:
        text = "a key of maxtext/configs/base.yml (no close match found)"
    return {"suggestion": text}


def first_container(groups: Mapping[str, str]) -> dict[str, str]:
    names = (groups.get("containers") or "").replace(",", " ").split()
    return {"container": names[0] if names else "jax-tpu-1"}


DERIVES: Mapping[str, tuple[Derive, frozenset[str]]] = {
    "memory_ratio": (memory_ratio, frozenset({"ratio", "over"})),
    "sharding_split": (sharding_split, frozenset({"fsdp", "data", "shape_note"})),
    "mesh_counts": (mesh_counts, frozenset({"seen"})),
    "flag_named": (flag_named, frozenset({"flag_note"})),
    "mesh_axis": (mesh_axis, frozenset({"axis_name", "old_axis_name"})),
    "key_suggestion": (key_suggestion, frozenset({"suggestion"})),
    "first_container": (first_container, frozenset({"container"})),
}
"""Derive functions by the name the catalog uses, with the placeholders each one fills."""
