"""Which family an error line belongs to when no signature knows its wording.

A multinomial naive Bayes model over the words, word pairs and character 3–5-grams of a line
(numbers, hexadecimal ids, URLs, paths and quoted names normalised away first), with one class
per error family and one, ``none``, for lines that read as errors but belong to no family (other
tools' errors, warnings a healthy run prints). Its counts are data:
``catalog/error_classifier.json``, built by ``tools/build_diagnose_classifier.py`` from the
corpus and the services' message formats (:func:`train` here is that build).

Only lines that read as errors are classified (:func:`reads_as_error`: a failure word, an
exception name, a status code, an exit code; never INFO or DEBUG lines nor source lines shown in
a traceback), and only when no signature matched them. A verdict counts when the most likely
class is a family, its confidence reaches the model's threshold, and the line holds what the
family requires of it (``classify_requires`` in ``error_families.yaml``: a TPU runtime line names
the TPU, XLA, JAX or a device; another framework's assertion does not).

Plain Python: a line's score is a sum of looked-up log-probabilities.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import pairwise

from tpu_trainer.catalog.error_signatures import catalog
from tpu_trainer.plan.word_trie import trie_pattern

NONE = "none"
"""The class of lines that read as errors but belong to no family."""
MODEL_FILE = "error_classifier.json"
"""The model's file name inside ``tpu_trainer.catalog``."""
CHAR_GRAMS = (3, 4, 5)
"""Lengths of the character n-grams taken inside each word."""

_STEMS = (
    "error", "exception", "fatal", "fail", "denied", "forbidden", "refused", "unable", "cannot",
    "can't", "couldn't", "could not", "not found", "invalid", "exceed", "exhausted",
    "insufficient", "timed out", "time out", "timeout", "abort", "killed", "panic", "crash",
    "unavailable", "unhealthy", "oom", "backoff", "back-off", "unauthori", "unauthenticated",
    "rejected", "evicted", "preempted", "not allowed", "does not", "doesn't", "didn't",
    "did not", "not supported", "not available", "no such", "missing",
    "unknown", "unsupported", "deadline", "stockout", "stopiteration", "already exists",
    "already in use", "imminent", "exit ", "exited ", "status ", "[warning]", "not_found",
    "already_exists", "out_of_range", "data_loss", "not_met",
)  # fmt: skip
"""Lower-case texts one of which every line the gate takes holds: a line with none of them
(most progress and step lines) is dismissed by one search."""
_ANY_STEM = re.compile(trie_pattern(_STEMS))
_GATE = re.compile(
    r"\b(?:errors?|exception|fatal|fail(?:ed|ure|s|ing)?|denied|forbidden|refused|unable|cannot"
    r"|can't|couldn't|could not|not found|invalid|exceed(?:ed|s)?|exhausted|insufficient"
    r"|timed? ?out|abort(?:ed|ing)?|killed|panic|crash\w*|unavailable|unhealthy|oom\w*"
    r"|back-?off|unauthori[sz]ed|unauthenticated|rejected|evicted|preempted|not allowed"
    r"|does not|doesn't|didn't|did not|not supported|not available|no such"
    r"|missing|unknown|unsupported|deadline|stockout|StopIteration|already (?:exists|in use)"
    r"|imminent)\b"
    r"|(?-i:\w(?:Error|Exception|Failure|BackOff)\b|\bFailed\w+|\[Warning\]"
    r"|\b[A-Z]{2,}(?:_[A-Z]+)+\b)"
    r"|\b(?:exit|status)(?:ed)? (?:with )?(?:code|status)? ?[1-9]\d*",
    re.IGNORECASE,
)
"""A line that reads as an error: a failure word, an exception or status name, an exit code."""
_GLOG_ERROR = re.compile(r"[EF]\d{4} ")
"""The prefix of a line glog logged at ERROR or FATAL."""
_LOGGED_INFO = re.compile(r"\s*(?:I\d{4}\s|\[?(?:INFO|DEBUG)\]?[:\s])")
_NOT_ERROR = re.compile(
    r"(?:^|[\s\]|:])(?:INFO|DEBUG)(?:[\s:\]|]|$)"
    r"|^[\d\-:. T]+:?\s+I\s\S+:\d+\]|^\S*\s*I\s\d\d-\d\d\s"
    r"|^\s*(?:raise\s|except\b|if\b|def\b|return\b|logger\.|logging\.|print\(|warnings\.warn"
    r"|File \"|\[XPK\]\s+Task:|@\s+0x[0-9a-f]+\s)"
    r"|^(?:(?!Error: ).)*Unable to initialize backend '[^']*':"
    r"(?!.*\((?:set JAX_PLATFORMS|you may need to uninstall))"
)
"""Lines logged at INFO or DEBUG, source lines and native stack frames (``@ 0x7f... (unknown)``)
shown in tracebacks, and JAX's backend probe
(``Unable to initialize backend '<name>': ...`` logged, not raised: JAX tries every backend it
knows and logs each one that fails at INFO; a raised one follows an exception name or ends with
its ``(set JAX_PLATFORMS=...)`` advice): never classified."""

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_QUOTED = re.compile(r"([\"'`])([^\"'`\s]{1,80})\1")
_PATH = re.compile(r"(?:[\w.@:-]*/){2,}[\w.@:-]*")
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}\b")
_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[a-z][a-z_]+")


def reads_as_error(line: str, low: str | None = None) -> bool:
    """True for a line that reads as an error and is not logged at INFO/DEBUG nor a source
    line of a traceback (``low``: the line lower-cased, when the caller has it)."""
    if _LOGGED_INFO.match(line):
        return False
    if _ANY_STEM.search(line.lower() if low is None else low) is None:
        return _GLOG_ERROR.match(line) is not None and _NOT_ERROR.search(line) is None
    if _GATE.search(line) is None and _GLOG_ERROR.match(line) is None:
        return False
    return _NOT_ERROR.search(line) is None


def normalise(text: str) -> str:
    """``text`` lower-cased, with URLs, quoted names, paths, hexadecimal ids and numbers
    replaced by placeholders (``url``, ``name``, ``path``, ``0``)."""
    text = _URL.sub(" url ", text.lower())
    text = _QUOTED.sub(" name ", text)
    text = _PATH.sub(" path ", text)
    return _NUMBER.sub("0", _HEX.sub(" 0 ", text))


def features(text: str) -> frozenset[str]:
    """The features of ``text``: its words (``w:``), pairs of neighbouring words (``b:``) and
    the character n-grams of each word padded with spaces (``c:``)."""
    words = _WORD.findall(normalise(text))
    found = {f"w:{w}" for w in words}
    found.update(f"b:{a} {b}" for a, b in pairwise(words))
    for word in set(words):
        padded = f" {word} "
        for n in CHAR_GRAMS:
            found.update(f"c:{padded[i : i + n]}" for i in range(len(padded) - n + 1))
    return frozenset(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The family a line most likely belongs to, and how sure the model is (0–1)."""

    family: str
    confidence: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """Feature counts per class (how many training texts of the class hold the feature) and
    the settings that turn them into verdicts."""

    classes: tuple[str, ...]
    """The families and :data:`NONE`, sorted."""
    documents: tuple[int, ...]
    """Training texts per class."""
    counts: Mapping[str, tuple[tuple[int, int], ...]]
    """Per feature, (class index, count) for the classes whose texts hold it."""
    alpha: float = 0.1
    """Additive smoothing of the counts."""
    scale: float = 5.0
    """The mean log-probability of a line's features is multiplied by this before the
    softmax that gives the confidence."""
    threshold: float = 0.85
    """Lowest confidence of a verdict."""

    def to_json(self) -> str:
        """The data file: settings first, then one feature a line (sorted), for short diffs."""
        head = {
            "about": "Built by tools/build_diagnose_classifier.py; do not edit by hand.",
            "alpha": self.alpha,
            "scale": self.scale,
            "threshold": self.threshold,
            "classes": list(self.classes),
            "documents": list(self.documents),
        }
        lines = [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        body = [
            f"{json.dumps(name)}: {json.dumps([n for pair in pairs for n in pair])}"
            for name, pairs in sorted(self.counts.items())
        ]
        return "{\n" + "\n".join(lines) + '\n"counts": {\n' + ",\n".join(body) + "\n}}\n"

    @classmethod
    def from_json(cls, text: str) -> Model:
        doc = json.loads(text)
        counts = {
            name: tuple(zip(flat[0::2], flat[1::2], strict=True))
            for name, flat in doc["counts"].items()
        }
        return cls(
            classes=tuple(doc["classes"]),
            documents=tuple(doc["documents"]),
            counts=counts,
            alpha=float(doc["alpha"]),
            scale=float(doc["scale"]),
            threshold=float(doc["threshold"]),
        )


def train(
    examples: Iterable[tuple[str, str]],
    *,
    min_documents: int = 2,
    alpha: float = 0.1,
    scale: float = 5.0,
    threshold: float = 0.85,
) -> Model:
    """A model from ``(class, text)`` examples; features held by fewer than ``min_documents``
    texts are dropped (they name one thread's particulars, not a family's vocabulary)."""
    per_class: dict[str, Counter[str]] = {}
    docs: Counter[str] = Counter()
    spread: Counter[str] = Counter()
    for family, text in examples:
        found = features(text)
        per_class.setdefault(family, Counter()).update(found)
        spread.update(found)
        docs[family] += 1
    classes = tuple(sorted(per_class))
    counts: dict[str, list[tuple[int, int]]] = {}
    for index, family in enumerate(classes):
        for name, n in per_class[family].items():
            if spread[name] >= min_documents:
                counts.setdefault(name, []).append((index, n))
    return Model(
        classes=classes,
        documents=tuple(docs[c] for c in classes),
        counts={k: tuple(v) for k, v in counts.items()},
        alpha=alpha,
        scale=scale,
        threshold=threshold,
    )


def training_examples(texts: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(family, text)`` pairs of a corpus as training examples: an error's whole text under
    its family, and each line of a near-miss (family :data:`NONE`) that reads as an error under
    :data:`NONE` (its other lines are never classified)."""
    examples: list[tuple[str, str]] = []
    for family, text in texts:
        if family != NONE:
            examples.append((family, text))
            continue
        examples.extend((NONE, line) for line in text.splitlines() if reads_as_error(line))
    return examples


class Classifier:
    """Verdicts of a :class:`Model` on single lines."""

    def __init__(self, model: Model, requires: Mapping[str, re.Pattern[str]] | None = None) -> None:
        """``requires``: per family, what a line put in it must hold (by default the catalog's
        ``classify_requires``)."""
        self.model = model
        if requires is None:
            requires = {f.id: f.requires for f in catalog().families if f.requires is not None}
        self.requires = dict(requires)
        width = len(model.classes)
        totals = [0] * width
        for pairs in model.counts.values():
            for index, n in pairs:
                totals[index] += n
        vocabulary = len(model.counts)
        denominators = [math.log(t + model.alpha * vocabulary) for t in totals]
        self._unseen = tuple(math.log(model.alpha) - d for d in denominators)
        self._logp: dict[str, tuple[float, ...]] = {}
        for name, pairs in model.counts.items():
            row = list(self._unseen)
            for index, n in pairs:
                row[index] = math.log(n + model.alpha) - denominators[index]
            self._logp[name] = tuple(row)
        self._none = model.classes.index(NONE) if NONE in model.classes else -1

    def verdict(self, line: str) -> Verdict | None:
        """The most likely class of ``line`` and its confidence, or None when no feature of
        the line is known."""
        rows = [self._logp[f] for f in features(line) if f in self._logp]
        if not rows:
            return None
        factor = self.model.scale / len(rows)
        scores = [sum(column) * factor for column in zip(*rows, strict=True)]
        top = max(scores)
        total = sum(math.exp(s - top) for s in scores)
        best = scores.index(top)
        return Verdict(family=self.model.classes[best], confidence=1.0 / total)

    def classify(self, line: str) -> Verdict | None:
        """The family of ``line`` when its most likely class is a family with a confidence at
        the model's threshold or above and the line holds what the family requires; None
        otherwise (``none``, unsure, nothing known, another field's wording)."""
        found = self.verdict(line)
        if found is None or found.family == NONE or found.confidence < self.model.threshold:
            return None
        needed = self.requires.get(found.family)
        if needed is not None and needed.search(line) is None:
            return None
        return found


@functools.cache
def packaged() -> Classifier:
    """The classifier of the packaged model, read on first use."""
    text = resources.files("tpu_trainer.catalog").joinpath(MODEL_FILE).read_text("utf-8")
    return Classifier(Model.from_json(text))


def best_verdict(classifier: Classifier, lines: Sequence[str]) -> Verdict | None:
    """The most confident family verdict among ``lines`` that read as errors (the classifier
    alone, without signatures: how the benchmark measures it)."""
    verdicts = [classifier.classify(line) for line in lines if reads_as_error(line)]
    found = [v for v in verdicts if v is not None]
    return max(found, key=lambda v: v.confidence) if found else None


_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("zone", re.compile(r"\b(?:[a-z]+-){1,2}[a-z]+\d+-[a-z]\b")),
    ("region", re.compile(r"\b(?:[a-z]+-){1,2}[a-z]+\d+\b(?!-[a-z]\b)")),
    ("size", re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGTP]i?B|[KMGTP])\b")),
    ("name", re.compile(r"[\"'`]([\w./:@-]{2,120})[\"'`]")),
    ("status", re.compile(r"\b[A-Z]{3,}(?:_[A-Z]+)+\b|\b(?:code|status|Error)[ =:]+\d{3}\b")),
)
MESSAGE_CHARS = 200
"""Longest message quoted in a classified match's fix."""


def line_fields(line: str) -> tuple[tuple[str, str], ...]:
    """What a classified line offers its family's fix: the message itself (trimmed), and the
    first zone, region, size, quoted name and status code in it."""
    message = line.strip()
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1].rstrip() + "…"
    found = [("message", message)]
    for name, pattern in _FIELDS:
        m = pattern.search(line)
        if m is not None:
            found.append((name, (m.group(1) if m.groups() else m.group(0)).strip()))
    return tuple(found)
