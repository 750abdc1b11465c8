"""Which MaxText version a recipe's arguments are judged against, and why.

In order: ``--maxtext-version``; the configuration's ``maxtext_branch`` (the image is built from
it; a moving branch such as ``main`` stands for the newest known version); the MaxText tag or commit the recipe's README checks out (or the ``maxtext==X`` it
installs); else the runtime's version. A name the packaged tables do not hold falls back to the
runtime's, and says how to add it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.frameworks.maxtext.versions import KeyTable, maxtext_versions


class VersionSource(enum.Enum):
    FLAG = "--maxtext-version"
    CONFIG = "the configuration's maxtext_branch"
    README = "the recipe README's pin"
    DEFAULT = "the runtime's version"


@dataclass(frozen=True, slots=True)
class TargetVersion:
    table: KeyTable
    source: VersionSource
    asked: str
    """The name as given (flag, configuration or README); the table's name by default."""
    where: str = ""
    """The README the pin came from."""
    missing: bool = False
    """``asked`` is not in the packaged tables: ``table`` is the runtime's instead."""

    @property
    def is_reference(self) -> bool:
        return self.table.name == maxtext_versions().reference

    def why(self) -> str:
        """``MaxText a0fceb5 (2026-03-06), from the recipe README's pin (README.md)``."""
        origin = self.source.value + (f" ({self.where})" if self.where else "")
        if self.missing:
            return (
                f"MaxText {self.table.label} ({self.asked}, from {origin}, is not in the "
                "packaged key tables)"
            )
        moved = f" ({self.asked}: the newest known version)" if self.asked in MOVING else ""
        return f"MaxText {self.table.label}{moved}, from {origin}"


_CLONE = re.compile(r"git\s+clone\s+\S*?/(?P<repo>[\w.-]+?)(?:\.git)?(?:\s|$)")
_CHECKOUT = re.compile(r"git\s+checkout\s+(?P<rev>[\w./-]+)")
_PIP = re.compile(r"\bmaxtext(?:\[[\w,]+\])?==(?P<version>[\w.]+)")


def readme_pin(text: str) -> str | None:
    """The MaxText revision a README installs: the ``git checkout`` after cloning MaxText (a
    checkout after cloning another repository, MaxDiffusion say, is not MaxText's), or the
    version of ``maxtext==X``."""
    repo = ""
    for line in text.splitlines():
        clone = _CLONE.search(line)
        if clone:
            repo = clone.group("repo").lower()
            continue
        checkout = _CHECKOUT.search(line)
        if checkout and repo == "maxtext":
            return checkout.group("rev")
        pip = _PIP.search(line)
        if pip:
            return pip.group("version")
    return None


def recipe_pin(recipe_script: Path) -> tuple[str, Path] | None:
    """The pin of the README beside the recipe's script, or one level up (the ``xpk/`` level)."""
    for folder in (recipe_script.parent, recipe_script.parent.parent):
        readme = folder / "README.md"
        try:
            pin = readme_pin(readme.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if pin:
            return pin, readme
    return None


MOVING = frozenset({"main", "master", "HEAD"})
"""Branches that move: an image built from one runs MaxText newer than any table, so the newest
table stands for it."""


def newest() -> KeyTable:
    """The most recent version of the packaged tables (by release or commit day)."""
    return max(maxtext_versions().tables.values(), key=lambda t: (t.date, t.source == "pypi"))


def select_version(
    flag: str | None, config_branch: str | None, recipe_script: Path | None
) -> TargetVersion:
    """The version to judge against, by the order above."""
    versions = maxtext_versions()
    reference = versions.tables[versions.reference]
    asked: tuple[str, VersionSource, str] | None = None
    if flag:
        asked = (flag, VersionSource.FLAG, "")
    elif config_branch:
        asked = (config_branch, VersionSource.CONFIG, "")
    elif recipe_script is not None and (pin := recipe_pin(recipe_script)) is not None:
        asked = (pin[0], VersionSource.README, pin[1].name)
    if asked is None:
        return TargetVersion(reference, VersionSource.DEFAULT, reference.name)
    name, source, where = asked
    table = newest() if name in MOVING else versions.find(name)
    if table is None:
        return TargetVersion(reference, source, name, where, missing=True)
    return TargetVersion(table, source, name, where)
