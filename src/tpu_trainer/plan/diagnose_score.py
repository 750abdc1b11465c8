"""How well the error catalog recognises a corpus of real error texts, per family.

A corpus is a YAML list of entries ``{family, source, text}``: a few log lines as they appeared
in a public issue or page, the family ``diagnose`` must rank first, or ``none`` for a near-miss
that must match nothing. Each entry belongs to the ``dev`` or the ``heldout`` split by a hash of
its text, so the split never depends on the order of the file or on who reads it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.diagnose_classify import Classifier, Model, train, training_examples

NONE = "none"
"""The expected family of a near-miss: no match at all."""
Split = Literal["dev", "heldout"]
HELDOUT_SHARE = 4
"""One entry in this many (by hash) is held out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    family: str
    source: str
    text: str

    @property
    def split(self) -> Split:
        digest = hashlib.sha256(self.text.encode("utf-8")).digest()
        return "heldout" if digest[0] % HELDOUT_SHARE == 0 else "dev"


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    entry: Entry
    predicted: str
    """The family of the first-ranked match, or ``none``."""

    @property
    def correct(self) -> bool:
        return self.predicted == self.entry.family


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyScore:
    family: str
    expected: int
    """Entries of this family."""
    predicted: int
    """Entries ranked first as this family."""
    hits: int

    @property
    def precision(self) -> float | None:
        return self.hits / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.hits / self.expected if self.expected else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    outcomes: tuple[Outcome, ...]

    @property
    def rate(self) -> float:
        """Share of entries ranked in their family (near-misses: matched nothing)."""
        return sum(o.correct for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    @property
    def near_misses_matched(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.entry.family == NONE and o.predicted != NONE)

    @property
    def misses(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if not o.correct)

    def families(self) -> list[FamilyScore]:
        expected = Counter(o.entry.family for o in self.outcomes)
        predicted = Counter(o.predicted for o in self.outcomes)
        hits = Counter(o.predicted for o in self.outcomes if o.correct)
        names = sorted((set(expected) | set(predicted)) - {NONE})
        return [
            FamilyScore(family=n, expected=expected[n], predicted=predicted[n], hits=hits[n])
            for n in names
        ]


def load_corpus(path: Path) -> list[Entry]:
    """The entries of a corpus file (a YAML list of family/source/text mappings)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of entries")
    entries = []
    for n, item in enumerate(raw, start=1):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) and item[k].strip() for k in ("family", "source", "text")
        ):
            raise ValueError(f"{path}: entry {n} needs non-empty family, source and text")
        entries.append(Entry(family=item["family"], source=item["source"], text=item["text"]))
    return entries


def load_service_formats(path: Path) -> list[Entry]:
    """The messages of a service-formats file (groups of ``format`` and ``messages``, each
    message a family and a text) as entries whose source is their group's format."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of groups")
    entries = []
    for group in raw:
        for item in group["messages"]:
            entries.append(Entry(family=item["family"], source=group["format"], text=item["text"]))
    return entries


def predict(text: str, classifier: Classifier | None = None) -> str:
    """The family ``diagnose`` ranks first for ``text`` (with ``classifier``, else the
    packaged one), or ``none``."""
    matches = diagnose(text.splitlines(), classifier=classifier)
    return matches[0].family if matches else NONE


def score(
    entries: Iterable[Entry], split: Split | None = None, classifier: Classifier | None = None
) -> Score:
    """Run every entry (of ``split``, or all) through ``diagnose``."""
    chosen: Sequence[Entry] = [e for e in entries if split is None or e.split == split]
    return Score(
        outcomes=tuple(Outcome(entry=e, predicted=predict(e.text, classifier)) for e in chosen)
    )


def train_classifier(entries: Iterable[Entry]) -> Model:
    """The family classifier's model trained on ``entries`` (errors whole, near-misses by
    their lines that read as errors), with the default settings."""
    return train(training_examples((e.family, e.text) for e in entries))
