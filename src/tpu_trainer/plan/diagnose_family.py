"""Family-level matches: lines no signature matched that the family classifier put in a
family (:mod:`tpu_trainer.plan.diagnose_classify`), with the family's generic cause and fix."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tpu_trainer.catalog.error_signatures import Family
from tpu_trainer.plan.diagnose_classify import (
    CONTEXT,
    WHOLE_LINES,
    WINDOW_THRESHOLD,
    Classifier,
    Verdict,
    context_line,
    line_fields,
    packaged,
    read_whole,
)
from tpu_trainer.plan.diagnose_match import Match, excerpt, fill

CLASSIFIED_SOURCE = "family classifier (catalog/error_classifier.json)"
"""The ``source`` of a family-level match."""
BY_WORDING = " (by its wording)"
"""What a family-level match's title adds to its family's title."""


@dataclass(slots=True)
class _Window:
    """An error line the classifier was unsure of alone, and the lines around it so far (the
    :data:`CONTEXT` lines before and after it that may join a window)."""

    number: int
    line: str
    lines: list[str]
    after: int = field(default=CONTEXT)
    """Lines after it still to come."""


class Classified:
    """The classifier's family-level matches of a scan: per family, the most confident line
    (the earliest of equals) and how many lines the classifier put in the family."""

    def __init__(
        self,
        classifier: Classifier | None,
        families: Sequence[Family],
        ignore: re.Pattern[str] | None = None,
    ) -> None:
        """``ignore``: the catalog's echoes of configuration and commands, left out of a quiet
        text read whole."""
        self.classifier = classifier
        """None: the packaged classifier, read when the first line that reads as an error
        comes (a log without one never loads it)."""
        self.families = {f.id: f for f in families}
        self.ignore = ignore
        self.best: dict[str, Match] = {}
        self.counts: dict[str, int] = {}
        self.recent: deque[str] = deque(maxlen=CONTEXT + 1)
        """The last lines seen, this one included."""
        self.open: list[_Window] = []
        """Windows still waiting for their lines after."""
        self.short: list[tuple[int, str]] = []
        """Every line seen and its number, while at most :data:`WHOLE_LINES` lines have been
        seen (emptied after: too long to read whole)."""
        self.seen = 0
        """Lines seen."""
        self.first: tuple[int, str] | None = None
        """The first line fed: its number and text."""

    def see(self, number: int, text: str) -> None:
        """Every logical line of the scan (its line's ``number``), before it is fed: it joins
        the recent lines, and the windows still open if it may (:func:`context_line`); a window
        whose lines after have all come is classified."""
        self.recent.append(text)
        self.seen += 1
        if self.seen <= WHOLE_LINES:
            self.short.append((number, text))
        elif self.seen == WHOLE_LINES + 1:
            self.short = []
        if not self.open:
            return
        joins = context_line(text)
        waiting = []
        for window in self.open:
            if joins:
                window.lines.append(text)
            window.after -= 1
            if window.after:
                waiting.append(window)
            else:
                self._judge(window)
        self.open = waiting

    def feed(self, number: int, text: str) -> None:
        """Classify line ``number``: one that reads as an error and no signature matched. A
        line the classifier is unsure of alone (a family below the threshold, or no word it
        knows; not a line most likely healthy) is classified again with the lines around it
        once they have come."""
        if self.first is None:
            self.first = (number, text)
        verdict, unsure = self._classifier().alone(text)
        if unsure:
            before = [line for line in list(self.recent)[:-1] if context_line(line)]
            self.open.append(_Window(number, text, [*before, text]))
        elif verdict is not None:
            self._count(verdict, number, text)

    def _read_whole(self) -> None:
        """Classify a short text in which nothing was found, whole (nothing when it is long:
        :attr:`short` is empty then); the verdict goes on its first error line, or on the first
        line read when none reads as an error."""
        if not self.short:
            return
        texts = [text for _, text in self.short]
        whole = read_whole(self._classifier(), texts, self.first is not None, self.ignore)
        if whole is not None:
            index, verdict = whole
            self._count(verdict, *(self.first or self.short[index]))

    def _classifier(self) -> Classifier:
        if self.classifier is None:
            self.classifier = packaged()
        return self.classifier

    def _judge(self, window: _Window) -> None:
        verdict = self._classifier().classify("\n".join(window.lines), WINDOW_THRESHOLD)
        if verdict is not None:
            self._count(verdict, window.number, window.line)

    def _count(self, verdict: Verdict, number: int, text: str) -> None:
        if verdict.family not in self.families:
            return
        family = verdict.family
        self.counts[family] = self.counts.get(family, 0) + 1
        known = self.best.get(family)
        if known is None or (known.confidence or 0.0) < verdict.confidence:
            self.best[family] = _classified(self.families[family], verdict, number, text)

    def result(self, explained: set[str]) -> list[Match]:
        """The families no signature found (``explained``), most confident first (the windows
        still open are classified with the lines they have). When nothing was found at all in
        a short text, the text is classified whole: with a line that reads as an error, its
        lines that may join a window, and a verdict is placed on that first line; without one,
        all its lines at :data:`QUIET_THRESHOLD`, and a verdict is placed on its first line
        that is not blank."""
        for window in self.open:
            self._judge(window)
        self.open = []
        if not explained and not self.best:
            self._read_whole()
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
