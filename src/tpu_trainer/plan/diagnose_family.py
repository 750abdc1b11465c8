"""Family-level matches: lines no signature matched that the family classifier put in a
family (:mod:`tpu_trainer.plan.diagnose_classify`), with the family's generic cause and fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tpu_trainer.catalog.error_signatures import Family
from tpu_trainer.plan.diagnose_classify import Classifier, Verdict, line_fields, packaged
from tpu_trainer.plan.diagnose_match import Match, excerpt, fill

CLASSIFIED_SOURCE = "family classifier (catalog/error_classifier.json)"
"""The ``source`` of a family-level match."""
BY_WORDING = " (by its wording)"
"""What a family-level match's title adds to its family's title."""


class Classified:
    """The classifier's family-level matches of a scan: per family, the most confident line
    (the earliest of equals) and how many lines the classifier put in the family."""

    def __init__(self, classifier: Classifier | None, families: Sequence[Family]) -> None:
        self.classifier = classifier
        """None: the packaged classifier, read when the first line that reads as an error
        comes (a log without one never loads it)."""
        self.families = {f.id: f for f in families}
        self.best: dict[str, Match] = {}
        self.counts: dict[str, int] = {}

    def feed(self, number: int, text: str) -> None:
        """Classify line ``number``: one that reads as an error and no signature matched."""
        if self.classifier is None:
            self.classifier = packaged()
        verdict = self.classifier.classify(text)
        if verdict is None or verdict.family not in self.families:
            return
        family = verdict.family
        self.counts[family] = self.counts.get(family, 0) + 1
        known = self.best.get(family)
        if known is None or (known.confidence or 0.0) < verdict.confidence:
            self.best[family] = _classified(self.families[family], verdict, number, text)

    def result(self, explained: set[str]) -> list[Match]:
        """The families no signature found (``explained``), most confident first."""
        found = [m for family, m in self.best.items() if family not in explained]
        found.sort(key=lambda m: (-(m.confidence or 0.0), m.line, m.family))
        return [replace(m, count=self.counts[m.family]) for m in found]


def _classified(family: Family, verdict: Verdict, number: int, text: str) -> Match:
    fields = line_fields(text)
    values: dict[str, str | None] = dict(fields)
    return Match(
        signature=f"{family.id}-classified",
        family=family.id,
        title=family.title + BY_WORDING,
        cause=fill(family.cause, values),
        fix=fill(family.fix, values),
        severity="warning",
        line=number,
        excerpt=excerpt(text, 0, len(text)),
        source=CLASSIFIED_SOURCE,
        extracted=tuple((k, v) for k, v in fields if k != "message"),
        specificity=0,
        confidence=round(verdict.confidence, 3),
    )
