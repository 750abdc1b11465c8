"""Find known errors in a log: which family and signature, on which line, and the fix with the
values the match extracted.

Pure and streaming: :func:`diagnose` reads its lines once, keeps only the line before the
current one (to catch a message wrapped over two lines, as tracebacks and event tables do), one
entry per signature found and, for the family classifier, the last lines and the few windows
waiting for their lines after, so a log of any size is scanned in constant memory.

Ranking: fatal matches before warnings (a warning did not stop the run); among them the earliest
message first (the first error usually caused the ones after it: matches on neighbouring lines
are one message, a wrapper and the reason printed under it), then the most specific signature
(an exact message before a family's generic wording: within a message, its reason before the
wrapper's state), then the earliest line, then the match that starts first on the line (a
message before the reasons it lists), then catalog order.

A line that reads as an error but matches no signature is given to the family classifier
(:mod:`tpu_trainer.plan.diagnose_classify`), and one it is unsure of alone is given again with
the two lines before and after it; its verdicts are family-level matches
(``<family>-classified``, specificity 0, severity warning: they never stop a run), reported
only when no fatal signature matched (a known fatal error explains the failure; a guess would
only add noise), after every signature match, most confident first, and only for families no
signature found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from tpu_trainer.catalog.error_signatures import Signature, catalog
from tpu_trainer.plan.diagnose_classify import Classifier, reads_as_error
from tpu_trainer.plan.diagnose_family import Classified
from tpu_trainer.plan.diagnose_match import Match, excerpt, fill
from tpu_trainer.plan.diagnose_unwrap import unwrap, wrapped
from tpu_trainer.plan.word_trie import trie_pattern

__all__ = [
    "MAX_LINE_CHARS",
    "LiveScanner",
    "Match",
    "clean_line",
    "diagnose",
    "excerpt",
    "extracted",
    "fill",
    "has_fatal",
    "matches_to_json",
]

MAX_LINE_CHARS = 200_000
"""Longer lines are cut before matching (MaxText's config error lists ~800 keys on one line)."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTINUATION = re.compile(r"[ \t]+\S|\(\d+\) |- |\[(?!rank\d)[a-z]")
"""A line that continues a message: indented, or an item of a list (``(1) ...``, ``- ...``), or
the start of a list of reasons (``[maximum cpu usage per Pod is 2, ...``: Kubernetes prints an
aggregate of errors in brackets; not a prefix such as ``[XPK]``, ``[W503 ...]``, a timestamp or
torch's ``[rank0]:``)."""
_YAML_KEY = re.compile(r"\s*(?:- )?[\w.-]+:\s*$")
"""A line that only opens a YAML block (``status:``, ``- conditions:``)."""
_SEVERITY_ORDER: Mapping[str, int] = {"fatal": 0, "warning": 1}


def diagnose(
    lines: Iterable[str],
    known: Sequence[Signature] | None = None,
    *,
    classifier: Classifier | None = None,
    classify: bool | None = None,
) -> list[Match]:
    """Every signature found in ``lines``, ranked (see the module's docstring): the packaged
    catalog's (lines it marks as echoes of configuration or commands are skipped), or the
    ``known`` signatures alone; then the family-level matches of the classifier (``classifier``,
    else the packaged one) for lines no signature matched. ``classify`` defaults to True with
    the packaged catalog and to False with ``known`` signatures.

    Each line is tried on its own, then joined (with a space) to the line before it; a joined
    match counts only when it crosses the join and the earlier line did not already match that
    signature on its own. A fallback signature counts only on lines no other signature matched.
    ``lines`` is read once, lazily (a file or a generator will do).
    """
    scan = _scan(known, classifier, classify)
    for number, raw in enumerate(lines, start=1):
        scan.feed(number, clean_line(raw))
    return scan.result()


def _scan(
    custom: Sequence[Signature] | None,
    classifier: Classifier | None = None,
    classify: bool | None = None,
) -> _Scan:
    """A scan with the packaged catalog (and its ignored lines), or with ``custom`` signatures;
    with the family classifier when ``classify`` (by default: with the packaged catalog)."""
    known = catalog()
    if classify is None:
        classify = custom is None
    ignore = known.ignore if custom is None else None
    families = Classified(classifier, known.families, ignore) if classify else None
    if custom is not None:
        return _Scan(tuple(custom), classified=families)
    return _Scan(known.signatures, known.ignore, classified=families)


class _Scan:
    """The scanner's state: the previous line, and the first match and count per signature.

    Signatures are numbered by position; a line is only matched against the signatures whose
    needles it (or the line before, or the join of both) contains.
    """

    def __init__(
        self,
        signatures: tuple[Signature, ...],
        ignore: re.Pattern[str] | None = None,
        *,
        classified: Classified | None = None,
    ) -> None:
        self.signatures = signatures
        self.classified = classified
        self.ignore = ignore
        self.needles = _Needles(signatures)
        self.width = self.needles.width
        self.first: dict[int, Match] = {}
        self.counts: dict[int, int] = {}
        self.counted: dict[int, int] = {}
        """The last line each signature was counted on (a line's pieces count it once)."""
        self.prev = ""
        self.prev_low = ""
        self.prev_number = 0
        self.prev_unsure = False
        """The line before has not been checked against the ignored lines yet."""
        self.prev_candidates: set[int] = set()
        self.prev_hits: set[int] = set()

    def feed(self, number: int, line: str) -> None:
        """Read line ``number``: each logical line it holds (:func:`unwrap`: the messages inside
        a wrapper), all reported as line ``number``."""
        if not wrapped(line):
            self._feed(number, line)  # most lines: one cheap test
            return
        for text in unwrap(line):
            self._feed(number, text)

    def _feed(self, number: int, text: str) -> None:
        """Try the candidate signatures on a logical line of line ``number`` and on it joined to
        the one before. A match on a line that continues the one before (an indented or numbered
        line after a line ending in a colon, as Terraform, gcloud and Config Connector print a
        failure's reasons under its wrapper) is reported on the line before: the two are one
        message, whose most specific signature then ranks first.

        Whether a line is an ignored echo is only asked when it matters: when this line, or the
        join with the line before, holds a needle (a line without any is kept as is, and asked
        about if the line after it needs to be joined to it)."""
        low = text.lower()
        if self.classified is not None:
            self.classified.see(number, text)
        candidates = self._candidates(low)
        if not candidates and not self.prev_candidates:
            self._shift(number, text, low, candidates, set(), unsure=True)
            self._classify(number, text, low, unsure=True)
            return
        if self.prev_unsure and self._ignored(self.prev):
            self.prev = self.prev_low = ""
            candidates = self._candidates(low)
        if self._ignored(text):
            # An echo of configuration or of a command: nothing to find, nor to join.
            text = low = ""
            candidates = self._candidates(low)
        found: dict[int, tuple[int, str, re.Match[str]]] = {}
        for i in sorted(candidates | self.prev_candidates):
            sig = self.signatures[i]
            hit = _on_line(sig, text) if i in candidates else None
            if hit is None and self.prev and i not in self.prev_hits and not sig.fallback:
                hit = _across(sig, self.prev, text)
            if hit is not None:
                found[i] = hit
        for i in self._redundant(found):
            del found[i]
        own = self.prev_number if self._continues(text) else number
        for i, (back, haystack, m) in found.items():
            self._record(i, self.prev_number if back else own, haystack, m)
        if not found:
            self._classify(number, text, low, unsure=False)
        self._shift(number, text, low, candidates, set(found), unsure=False)

    def _continues(self, text: str) -> bool:
        """Whether ``text`` continues the line before: that line ends with a colon (and is not
        a bare YAML key, ``conditions:``, whose block holds messages of their own) and this one
        is indented or starts with an item marker (``(1)``, ``-``)."""
        return (
            bool(self.prev)
            and self.prev.rstrip().endswith(":")
            and _CONTINUATION.match(text) is not None
            and _YAML_KEY.match(self.prev) is None
        )

    def _classify(self, number: int, text: str, low: str, *, unsure: bool) -> None:
        """Give a line no signature matched to the classifier if it reads as an error (and,
        when ``unsure``, is not an ignored echo: asked only then, as it costs a search)."""
        if self.classified is None or not text or not reads_as_error(text, low):
            return
        if not (unsure and self._ignored(text)):
            self.classified.feed(number, text)

    def _candidates(self, low: str) -> set[int]:
        """Signatures with a needle in the tail of the line before, a space and ``low``: this
        line's own and those that cross the join (the tail's own were found last time)."""
        tail = f"{self.prev_low[-self.width :]} " if self.prev else ""
        return self.needles.find(tail + low)

    def _ignored(self, text: str) -> bool:
        return bool(text) and self.ignore is not None and self.ignore.search(text) is not None

    def _shift(
        self,
        number: int,
        text: str,
        low: str,
        candidates: set[int],
        hits: set[int],
        *,
        unsure: bool,
    ) -> None:
        self.prev, self.prev_low, self.prev_unsure = text, low, unsure
        self.prev_number = number
        self.prev_candidates, self.prev_hits = candidates, hits

    def _redundant(self, found: Mapping[int, object]) -> set[int]:
        """Hits on one line that add nothing: fallbacks when anything else matched, and the
        less specific signatures of a family a more specific one of it explains."""
        sigs = self.signatures
        keep = [i for i in found if not sigs[i].fallback] or list(found)
        best: dict[str, int] = {}
        for i in keep:
            best[sigs[i].family] = max(best.get(sigs[i].family, 0), sigs[i].specificity)
        return {i for i in found if i not in keep or sigs[i].specificity < best[sigs[i].family]}

    def result(self) -> list[Match]:
        """The matches with their counts, ranked: fatal first, then by message (a run of
        neighbouring matched lines), then the most specific, then by first line, then by
        column, then catalog order."""
        message = _messages(m.line for m in self.first.values())
        ranked = sorted(
            self.first.items(),
            key=lambda item: (
                _SEVERITY_ORDER[item[1].severity],
                message[item[1].line],
                -item[1].specificity,
                item[1].line,
                item[1].column,
                item[0],
            ),
        )
        matches = [replace(m, count=self.counts[i]) for i, m in ranked]
        if self.classified is not None and not has_fatal(matches):
            matches += self.classified.result({m.family for m in matches})
        return matches

    def _record(self, i: int, line: int, text: str, m: re.Match[str]) -> None:
        sig = self.signatures[i]
        if self._explained(sig):
            return
        for j, other in list(self.first.items()):
            if j == i or other.line != line or other.family != sig.family:
                continue
            if other.specificity > sig.specificity:
                return  # a more specific signature of the family already explains the line
            if other.specificity < sig.specificity:
                self._forget(j)
        if self.counted.get(i) != line:
            self.counted[i] = line
            self.counts[i] = self.counts.get(i, 0) + 1
        if i not in self.first:
            self.first[i] = _match(sig, line, text, m)

    def _explained(self, sig: Signature) -> bool:
        """True for a fallback whose family a specific signature already explains, or a
        consequence that a fatal cause (of any family) explains; a specific signature removes
        the fallbacks of its family recorded before it, a cause the consequences."""
        sigs = self.signatures
        if any(_explains(sigs[j], sig) for j in self.first):
            return True
        for j in [j for j in self.first if _explains(sig, sigs[j])]:
            self._forget(j)
        return False

    def _forget(self, j: int) -> None:
        """Drop signature ``j``'s first match (a wrapped line showed a better one)."""
        del self.first[j]
        self.counted.pop(j, None)
        self.counts[j] -= 1
        if self.counts[j] == 0:
            del self.counts[j]


class _Needles:
    """Which signatures have a needle in a text.

    One expression of every needle (:func:`~tpu_trainer.plan.word_trie.trie_pattern`) is
    tried first: most log lines (steps, progress) hold none and are done with in one search.
    Only a line that holds one is tried needle by needle (a substring test each), with the
    signatures that use it.
    """

    def __init__(self, signatures: Sequence[Signature]) -> None:
        users: dict[str, list[int]] = {}
        for i, sig in enumerate(signatures):
            for needle in sig.needles:
                users.setdefault(needle, []).append(i)
        self.users = tuple((needle, tuple(ids)) for needle, ids in users.items())
        self.width = max((len(n) for n in users), default=0)
        self.any = re.compile(trie_pattern(list(users))) if users else None

    def find(self, low: str) -> set[int]:
        """Positions of the signatures with a needle in ``low`` (a lower-cased text)."""
        if self.any is None or self.any.search(low) is None:
            return set()
        return {i for needle, ids in self.users if needle in low for i in ids}


class LiveScanner:
    """Scans a log one line at a time as it arrives (a follower's view of :func:`diagnose`).

    Signatures only, unless ``classify``: a followed run stops on a fatal signature, never on a
    classifier's verdict (those explain a failure after the fact, in ``tpu-trainer diagnose``).
    """

    def __init__(self, known: Sequence[Signature] | None = None, *, classify: bool = False) -> None:
        self._scan = _scan(known, classify=classify)
        self._number = 0

    def feed(self, raw: str) -> None:
        self._number += 1
        self._scan.feed(self._number, clean_line(raw))

    @property
    def fatal(self) -> list[Match]:
        """Fatal matches so far (cheap to ask: only recorded first matches are looked at)."""
        if not any(m.severity == "fatal" for m in self._scan.first.values()):
            return []
        return [m for m in self._scan.result() if m.severity == "fatal"]

    def result(self) -> list[Match]:
        return self._scan.result()


def has_fatal(matches: Iterable[Match]) -> bool:
    """True when any match means the run cannot succeed."""
    return any(m.severity == "fatal" for m in matches)


def matches_to_json(matches: Iterable[Match]) -> list[dict[str, object]]:
    """The ``diagnose --json`` document: a list of :meth:`Match.to_json` objects."""
    return [m.to_json() for m in matches]


def clean_line(raw: str) -> str:
    """A log line without its line ending, ANSI colours, or anything past
    :data:`MAX_LINE_CHARS`."""
    text = raw.rstrip("\r\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text[:MAX_LINE_CHARS]


def _explains(cause: Signature, sig: Signature) -> bool:
    """Whether a match of ``cause`` makes one of ``sig`` redundant: a specific signature
    explains the fallbacks of its family, a fatal cause every consequence."""
    if cause.fallback or cause.consequence:
        return False
    if sig.consequence:
        return cause.severity == "fatal"
    return sig.fallback and cause.family == sig.family


def _on_line(sig: Signature, text: str) -> tuple[int, str, re.Match[str]] | None:
    m = sig.search(text)
    return None if m is None else (0, text, m)


MESSAGE_GAP = 2
"""Lines without a match that may stand between two matched lines of one message: a client
library's exception prints its status, its reason and its response headers before the body
that says what failed (``ApiException: (403)`` ... ``HTTP response body: ... exceeded quota``)."""


def _messages(lines: Iterable[int]) -> dict[int, int]:
    """Per matched line, the first line of its message: the run of matched lines it belongs
    to, each at most :data:`MESSAGE_GAP` lines after the one before."""
    first: dict[int, int] = {}
    before = start = -(MESSAGE_GAP + 2)
    for line in sorted(set(lines)):
        if line > before + 1 + MESSAGE_GAP:
            start = line
        first[line] = start
        before = line
    return first


def _across(sig: Signature, prev: str, text: str) -> tuple[int, str, re.Match[str]] | None:
    """A match of ``sig`` in ``prev`` + space + ``text`` that uses both lines (the space
    between them as one: a message folded onto an indented line, as YAML and Terraform fold
    long strings, reads as it was written)."""
    prev = prev.rstrip()
    joined = f"{prev} {text.lstrip()}"
    for pattern in sig.patterns:
        m = pattern.search(joined)
        if m is not None and m.start() < len(prev) < m.end():
            return 1, joined, m
    return None


def _match(sig: Signature, line: int, haystack: str, m: re.Match[str]) -> Match:
    values = _values(sig, m)
    return Match(
        signature=sig.id,
        family=sig.family,
        source=sig.source,
        specificity=sig.specificity,
        extracted=extracted(m),
        column=m.start(),
        title=sig.title,
        cause=fill(sig.cause, values),
        fix=fill(sig.fix, values),
        severity=sig.severity,
        line=line,
        excerpt=excerpt(haystack, m.start(), m.end()),
        transient=sig.transient,
    )


def extracted(m: re.Match[str]) -> tuple[tuple[str, str], ...]:
    """The named groups that took part in ``m``, stripped, in pattern order."""
    return tuple((k, v.strip()) for k, v in m.groupdict().items() if v and v.strip())


def _values(sig: Signature, m: re.Match[str]) -> dict[str, str]:
    """The named groups that took part in ``m`` and what ``sig.derive`` adds (:func:`fill`
    shows a placeholder neither gives as ``<name>``)."""
    values = dict(extracted(m))
    if sig.derive is not None:
        values.update(sig.derive(values))
    return values
