"""Known errors of TPU training runs: families of signatures, loaded from ``error_families.yaml``.

A *family* is one kind of failure (out of memory, scheduling, Kueue admission, ...); a
*signature* is one way that failure shows in a log: a few regular expressions tolerant of
numbers, names, quoting and the words around them, the fields they extract, and the cause and
fix filled with those fields. ``tpu_trainer.plan.diagnose`` scans logs with them.

The catalog is data: it is read, checked and compiled once, on first use (so importing this
module costs nothing), and every problem in the file is reported with the signature it is in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, cast

import yaml

from tpu_trainer.catalog.error_derive import (
    COMMON_MAXTEXT_KEYS,
    DERIVES,
    Derive,
    parse_size,
    suggest_keys,
)

__all__ = [
    "CATALOG_FILE",
    "CLASSIFIED_FIELDS",
    "COMMON_MAXTEXT_KEYS",
    "Catalog",
    "CatalogError",
    "Family",
    "Severity",
    "Signature",
    "by_id",
    "catalog",
    "families",
    "load_catalog",
    "parse_size",
    "signatures",
    "suggest_keys",
]

Severity = Literal["fatal", "warning"]
CATALOG_FILE = "error_families.yaml"
"""The catalog's file name inside this package."""

CLASSIFIED_FIELDS = ("message", "zone", "region", "size", "name", "status")
"""The values a family-level (classified) match extracts from its line, for the family's fix."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SIGNATURE_KEYS = frozenset(
    {
        "id",
        "family",
        "severity",
        "specificity",
        "fallback",
        "consequence",
        "transient",
        "needles",
        "patterns",
        "case_sensitive",
        "derive",
        "title",
        "cause",
        "fix",
        "source",
    }
)


class CatalogError(ValueError):
    """The error catalog file is malformed (names the signature and what is wrong)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """One kind of failure; its signatures are the ways it shows in logs."""

    id: str
    title: str
    summary: str
    """What the family covers, in a sentence."""
    cause: str
    """Why the family's errors happen, for a line classified into it (no signature matched)."""
    fix: str
    """What to check for such a line: the command or setting, with ``{message}``, ``{zone}``
    and the other :data:`CLASSIFIED_FIELDS` the line provides."""
    requires: re.Pattern[str] | None = None
    """What a line the classifier puts in this family must also hold (``classify_requires``:
    the family's own vocabulary, such as the TPU, XLA or JAX a TPU runtime line names); a line
    without it stays unmatched however its other words read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """One way a family's error shows in a log line, why it happens, what fixes it."""

    id: str
    """Stable name, used in ``--json`` output and by callers that react to one error."""
    family: str
    patterns: tuple[re.Pattern[str], ...]
    """Tried in order on every candidate line (and on a line joined to the one before it)."""
    needles: tuple[str, ...]
    """Lower-case texts, one of which every match contains: lines with none of them are
    skipped without running the patterns (this keeps a scan of a long log fast)."""
    title: str
    cause: str
    fix: str
    """The command or setting that fixes it; may name extracted fields as ``{field}``."""
    source: str
    """Where it is documented: a seed document or a public issue or page."""
    severity: Severity = "fatal"
    specificity: int = 2
    """Ranks matches on the same line: 3 an exact message, 2 a family's usual wording,
    1 a generic catch-all."""
    fallback: bool = False
    """Reported only for lines no other signature explains."""
    consequence: bool = False
    """A state that follows another error (a crash loop restarts a container that failed for
    its own reason): dropped when a fatal signature that is neither a fallback nor a
    consequence matched anywhere in the log, whatever its family."""
    derive: Derive | None = None
    """Extra ``{placeholders}`` computed from the extracted fields."""
    transient: bool = False
    """The error goes away by itself (a connection reset, a TPU worker briefly unavailable):
    a run may retry it on its error budget. Every other error never retries."""

    @property
    def pattern(self) -> re.Pattern[str]:
        """The first (most complete) pattern: the one whose groups callers may read."""
        return self.patterns[0]

    def search(self, text: str) -> re.Match[str] | None:
        """The first pattern's match in ``text``, else the next one's, else None."""
        for pattern in self.patterns:
            m = pattern.search(text)
            if m is not None:
                return m
        return None


@dataclass(frozen=True, slots=True)
class Catalog:
    families: tuple[Family, ...]
    signatures: tuple[Signature, ...]
    ignore: re.Pattern[str] | None = None
    """Lines that echo configuration or commands (MaxText's ``Config param`` dump, xpk's
    ``is implemented by``): never scanned, whatever words they hold."""

    def family(self, family_id: str) -> Family:
        for fam in self.families:
            if fam.id == family_id:
                return fam
        raise KeyError(family_id)


@functools.cache
def catalog() -> Catalog:
    """The packaged catalog, read and checked on first use."""
    text = resources.files("tpu_trainer.catalog").joinpath(CATALOG_FILE).read_text("utf-8")
    return load_catalog(text, CATALOG_FILE)


def signatures() -> tuple[Signature, ...]:
    """Every known signature, in the order they are tried (order only breaks ties)."""
    return catalog().signatures


def families() -> tuple[Family, ...]:
    return catalog().families


def by_id(signature_id: str) -> Signature:
    """The signature named ``signature_id`` (KeyError when there is none)."""
    for sig in signatures():
        if sig.id == signature_id:
            return sig
    raise KeyError(signature_id)


def load_catalog(text: str, name: str = "<catalog>") -> Catalog:
    """Parse and check a catalog document (``families:`` and ``signatures:``)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader either way
    except yaml.YAMLError as e:
        raise CatalogError(f"{name}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise CatalogError(f"{name}: expected a mapping with families and signatures")
    fams = tuple(_family(name, raw) for raw in _list(name, doc, "families"))
    known = {f.id for f in fams}
    if len(known) != len(fams):
        raise CatalogError(f"{name}: duplicate family ids")
    sigs = tuple(_signature(name, raw, known) for raw in _list(name, doc, "signatures"))
    ids = [s.id for s in sigs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CatalogError(f"{name}: duplicate signature ids: {', '.join(duplicates)}")
    empty = sorted(known - {s.family for s in sigs})
    if empty:
        raise CatalogError(f"{name}: families without signatures: {', '.join(empty)}")
    return Catalog(fams, sigs, _ignore(name, doc.get("ignore_lines", [])))


def _ignore(name: str, raw: object) -> re.Pattern[str] | None:
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise CatalogError(f"{name}: ignore_lines must be a list of patterns")
    where = f"{name}: ignore_lines"
    parts = [_compile(where, p, re.IGNORECASE).pattern for p in raw]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE) if parts else None


def _list(name: str, doc: Mapping[str, object], key: str) -> list[Mapping[str, object]]:
    items = doc.get(key)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise CatalogError(f"{name}: {key} must be a list of mappings")
    return cast(list[Mapping[str, object]], items)


def _family(name: str, raw: Mapping[str, object]) -> Family:
    where = f"{name}: family {raw.get('id')!r}"
    keys = ("id", "title", "summary", "cause", "fix")
    fam_id, title, summary, cause, fix = (_text(where, raw, k) for k in keys)
    if not _ID.fullmatch(fam_id):
        raise CatalogError(f"{where}: id must be lower-case words joined by '-'")
    unknown = sorted(set(_PLACEHOLDER.findall(cause + fix)) - set(CLASSIFIED_FIELDS))
    if unknown:
        raise CatalogError(f"{where}: placeholders a classified line cannot fill: {unknown}")
    extra = sorted(set(raw) - {*keys, "classify_requires"})
    if extra:
        raise CatalogError(f"{where}: unknown keys {', '.join(extra)}")
    requires = raw.get("classify_requires")
    if requires is not None and not (isinstance(requires, str) and requires):
        raise CatalogError(f"{where}: classify_requires must be a pattern")
    return Family(
        id=fam_id,
        title=title,
        summary=summary,
        cause=cause,
        fix=fix,
        requires=_compile(where, requires, re.IGNORECASE) if requires else None,
    )


def _signature(name: str, raw: Mapping[str, object], families_: set[str]) -> Signature:
    where = f"{name}: signature {raw.get('id')!r}"
    unknown = sorted(set(raw) - _SIGNATURE_KEYS)
    if unknown:
        raise CatalogError(f"{where}: unknown keys {', '.join(unknown)}")
    sig_id = _text(where, raw, "id")
    if not _ID.fullmatch(sig_id):
        raise CatalogError(f"{where}: id must be lower-case words joined by '-'")
    family = _text(where, raw, "family")
    if family not in families_:
        raise CatalogError(f"{where}: unknown family {family!r}")
    severity = raw.get("severity", "fatal")
    if severity not in ("fatal", "warning"):
        raise CatalogError(f"{where}: severity must be fatal or warning")
    specificity = raw.get("specificity", 2)
    if specificity not in (1, 2, 3):
        raise CatalogError(f"{where}: specificity must be 1, 2 or 3")
    flags = 0 if raw.get("case_sensitive", False) else re.IGNORECASE
    patterns = tuple(_compile(where, p, flags) for p in _strings(where, raw, "patterns"))
    needles = _strings(where, raw, "needles")
    if any(n != n.lower() for n in needles):
        raise CatalogError(f"{where}: needles must be lower case")
    transient = raw.get("transient", False)
    if not isinstance(transient, bool):
        raise CatalogError(f"{where}: transient must be true or false")
    derive_name = raw.get("derive")
    derive: Derive | None = None
    derived: frozenset[str] = frozenset()
    if derive_name is not None:
        if derive_name not in DERIVES:
            raise CatalogError(f"{where}: unknown derive {derive_name!r}")
        derive, derived = DERIVES[str(derive_name)]
    sig = Signature(
        id=sig_id,
        family=family,
        patterns=patterns,
        needles=needles,
        title=_text(where, raw, "title"),
        cause=_text(where, raw, "cause"),
        fix=_text(where, raw, "fix"),
        source=_text(where, raw, "source"),
        severity=severity,
        specificity=specificity,
        fallback=bool(raw.get("fallback", False)),
        consequence=bool(raw.get("consequence", False)),
        derive=derive,
        transient=transient,
    )
    groups = {g for p in patterns for g in p.groupindex} | derived
    missing = sorted(set(_PLACEHOLDER.findall(sig.cause + sig.fix)) - groups)
    if missing:
        raise CatalogError(f"{where}: placeholders no pattern fills: {', '.join(missing)}")
    return sig


def _text(where: str, raw: Mapping[str, object], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{where}: {key} must be a non-empty string")
    return value.strip()


def _strings(where: str, raw: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise CatalogError(f"{where}: {key} must be a non-empty list of strings")
    return tuple(cast(Sequence[str], value))


def _compile(where: str, pattern: str, flags: int) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise CatalogError(f"{where}: bad pattern {pattern!r}: {e}") from None
