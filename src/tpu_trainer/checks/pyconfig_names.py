"""MaxText configuration keys: the index of the names a MaxText version accepts, what a key may
have meant, and the check of a command's keys (unknown, nested, derived), each fix ending with
the ``--unset``/``--set`` flags that make it. Used by ``checks/pyconfig.py`` (the reference
version) and ``checks/pyconfig_version.py`` (any version of the packaged key tables)."""

from __future__ import annotations

import difflib
import functools
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tpu_trainer.frameworks.maxtext.pyconfig_keys import pyconfig_keys
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.runtime.manager import MAXTEXT

NAME = "maxtext-config"
_KEYS = pyconfig_keys()
DERIVED = _KEYS.derived
"""``DerivedValues``: accepted names MaxText computes and overwrites → what to set instead."""
ACCEPTED_BEYOND_BASE = _KEYS.accepted_beyond_base
"""Fields of ``MaxTextConfig`` with no base.yml entry that are real settings."""
NESTED = _KEYS.nested
"""Sections set as ``lora.lora_rank=8``; a bare ``lora_rank=8`` fails (extra_forbidden)."""
RENAMES = _KEYS.renames
"""Keys people pass that MaxText 0.2.5 knows under another name (seed 001: weight_decay)."""


# ---- the index of names (built once per base.yml) -------------------------------------------
@dataclass(frozen=True, slots=True)
class NameIndex:
    known: frozenset[str]
    ordered: tuple[str, ...]
    """Derived values first, as MaxText lists them, then base.yml's keys, then the rest."""
    same_words: Mapping[frozenset[str], tuple[str, ...]]
    """Names by their set of ``_``-separated words (``fsdp_shard_on_exp`` → shard_exp_on_fsdp)."""
    by_word: Mapping[str, frozenset[str]]
    memo: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)


@functools.lru_cache(maxsize=4)
def name_index(base_keys: tuple[str, ...]) -> NameIndex:
    ordered = (*DERIVED, *base_keys, *sorted(ACCEPTED_BEYOND_BASE))
    same: dict[frozenset[str], list[str]] = {}
    by_word: dict[str, set[str]] = {}
    for name in ordered:
        same.setdefault(frozenset(name.split("_")), []).append(name)
        for word in name.split("_"):
            by_word.setdefault(word, set()).add(name)
    return NameIndex(
        frozenset(ordered),
        ordered,
        {k: tuple(v) for k, v in same.items()},
        {k: frozenset(v) for k, v in by_word.items()},
    )


def suggestions(key: str, index: NameIndex) -> tuple[str, ...]:
    """Known names ``key`` may have meant: the rename table, the same words, close spellings."""
    if key not in index.memo:
        out = [t for t in RENAMES[key].targets if t in index.known] if key in RENAMES else []
        out += index.same_words.get(frozenset(key.split("_")), ())
        sharing = set().union(*(index.by_word.get(w, ()) for w in key.split("_")))
        near = sharing or {n for n in index.ordered if abs(len(n) - len(key)) <= 2}
        out += difflib.get_close_matches(key, sorted(near), n=3, cutoff=0.8)
        index.memo[key] = tuple(dict.fromkeys(n for n in out if n != key))[:4]
    return index.memo[key]


def _banner(key: str, index: NameIndex) -> str:
    head = ", ".join(repr(n) for n in index.ordered[:2])
    return f"MAXTEXT CONFIG ERROR: {key!r} not in {head}, … ({len(index.known)} names)"


# ---- the fast checks ------------------------------------------------------------------------
_OTHER_VERSION = (
    " (a key with no counterpart may belong to another MaxText version: drop it, or run the "
    "image of the version the recipe was written for)"
)


@dataclass(frozen=True, slots=True)
class KeyNote:
    """What other MaxText versions say about a key the judged one lacks."""

    text: str
    """``fsdp_shard_on_exp was renamed shard_exp_on_fsdp after 98a3d4c (2026-01-05); ...``"""
    name: str | None = None
    """The judged version's name for it, when it has one."""


History = Callable[[str], KeyNote | None]


def flags(unset: Sequence[str], sets: Sequence[tuple[str, str]]) -> str:
    """``--unset K --set K2=V``: what to add to the command, quoted for a shell."""
    words = [f"--unset {shlex.quote(k)}" for k in unset]
    words += [f"--set {shlex.quote(f'{k}={v}')}" for k, v in sets]
    return " ".join(words)


def _rename_fix(
    key: str, text: str, options: Sequence[str], args: Mapping[str, str]
) -> tuple[str, list[tuple[str, str]]]:
    """The fix in words and the ``--set`` pairs that go with ``--unset key``."""
    if not options:
        return f"drop {key}", []
    if options[0] in args:
        return f"drop {key} ({options[0]} is already set)", []
    rename = RENAMES.get(key)
    if rename is not None and len(rename.targets) > 1:
        wanted = [t for t in rename.targets if t in options and t not in args]
        words = " ".join(f"{t}={text}" for t in wanted)
        return f"{key}={text} → {words} ({rename.note}: set the ones your optimizer reads)", [
            (wanted[0], text)
        ] if wanted else []
    return f"{key}={text} → {options[0]}={text}", [(options[0], text)]


def check_keys(
    args: Mapping[str, str],
    index: NameIndex,
    *,
    version: str = MAXTEXT.version,
    history: History | None = None,
) -> list[Finding]:
    """Unknown keys (with suggestions and what other versions call them), nested fields set
    bare, and derived values set. Each fix ends with the flags that make it."""
    unknown: list[str] = []
    fixes: list[str] = []
    unset: list[str] = []
    sets: list[tuple[str, str]] = []
    derived: list[str] = []
    noted = False
    for key, text in args.items():
        head, dot, tail = key.partition(".")
        section = next((s for s, names in NESTED.items() if key in names), None)
        if dot and head in NESTED and tail in NESTED[head]:
            continue
        if section:
            unknown.append(
                f"{key} (a {section} setting: pydantic answers `Extra inputs are not permitted`)"
            )
            fixes.append(f"{key}={text} → {section}.{key}={text}")
            unset.append(key)
            sets.append((f"{section}.{key}", text))
        elif dot or key not in index.known:
            name = head if dot else key
            note = history(name) if history else None
            options = suggestions(name, index)
            if note and note.name in index.known:
                options = (note.name, *(o for o in options if o != note.name))
            why = "; ".join(
                w
                for w in (
                    RENAMES[name].note if name in RENAMES and not (note and note.name) else "",
                    note.text if note else "",
                )
                if w
            )
            noted = noted or note is not None
            shown = f" → {' or '.join(options)}" if options else ""
            unknown.append(f"{name}{shown}" + (f" ({why})" if why else ""))
            fix, pairs = _rename_fix(key, text, options, args)
            fixes.append(fix)
            unset.append(key)
            sets += pairs
        elif key in DERIVED:
            derived.append(key)
    findings: list[Finding] = []
    if unknown:
        first = unknown[0].split(" ")[0]
        other = any(f.startswith("drop ") for f in fixes) and not noted
        findings.append(
            Finding(
                f"{NAME} keys",
                Level.FAIL,
                f"{_banner(first, index)} — MaxText {version} stops at the first unknown "
                f"key; {len(unknown)} here: {'; '.join(unknown)}",
                fix="; ".join(fixes)
                + (_OTHER_VERSION if other else "")
                + f". Add to the command: {flags(unset, sets)}",
            )
        )
    else:
        findings.append(
            Finding(
                f"{NAME} keys",
                Level.PASS,
                f"every key ({len(args)}) is a MaxText {version} setting",
            )
        )
    if derived:
        instead = sorted({DERIVED[k] for k in derived if DERIVED[k]})
        findings.append(
            Finding(
                f"{NAME} derived keys",
                Level.WARN,
                f"{', '.join(derived)}: MaxText accepts the name but computes the value; what the "
                "command gives is replaced",
                fix="drop them"
                + (f" and set {', '.join(instead)} instead" if instead else "")
                + f" ({flags(derived, [])})",
            )
        )
    return findings
