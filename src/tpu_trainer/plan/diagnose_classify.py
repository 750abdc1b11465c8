"""Which family an error line belongs to when no signature knows its wording.

A multinomial logistic regression over the words, word pairs and character 3–5-grams of a
line (numbers, hexadecimal ids, URLs, paths and quoted names normalised away first), with one
class per error family and one, ``none``, for lines that read as errors but belong to no family
(other tools' errors, warnings a healthy run prints). Strongly regularised, so a wording it has
never seen gets a middling probability rather than a confident guess. Its weights are data:
``catalog/error_classifier.json``, built by ``tools/build_diagnose_classifier.py`` from the
corpus and the services' message formats (:func:`train` here is that build: a few seconds of
plain Python, deterministic).

Only lines that read as errors are classified (:func:`reads_as_error`: a failure word, an
exception name, a status code, an exit code; never INFO or DEBUG lines nor source lines shown in
a traceback), and only when no signature matched them; a short text in which nothing was
found is read whole (:func:`best_verdict`), one without any such line at a higher threshold
(:data:`QUIET_THRESHOLD`). A verdict counts when the most likely
class is a family, its confidence reaches the model's threshold, and the line holds what the
family requires of it (``classify_requires`` in ``error_families.yaml``: a TPU runtime line names
the TPU, XLA, JAX or a device; another framework's assertion does not).

Plain Python: a line's score per class is a sum of looked-up weights, its confidence their
softmax.
"""

from __future__ import annotations

import functools
import json
import math
import random
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
CONTEXT = 2
"""Lines before and after an error line that its window holds: a line the classifier is unsure
of alone is classified again with them (a traceback's or a status block's words around it)."""
CHAR_GRAMS = (3, 4, 5)
"""Lengths of the character n-grams taken inside each word."""
THRESHOLD = 0.4
"""Lowest confidence of a verdict (chosen by the grouped cross-validation of
``bench/diagnose_corpus.py --cross-validate``)."""
WINDOW_THRESHOLD = 0.55
"""Lowest confidence of a verdict on a window (a line unsure alone, with the lines around it):
their words are not all the error's, so a window must be surer (the same cross-validation: as
many errors right as at the line's threshold, fewer healthy windows put in a family)."""
WHOLE_LINES = 60
"""Longest text (in lines) the classifier reads whole when nothing in it was found otherwise:
a pasted excerpt, whose words together name the failure (a status block, a Workload's
conditions) when no line alone does; a log longer than this is not read whole."""
WHOLE_THRESHOLD = 0.5
"""Lowest confidence of a verdict on a whole text (the same cross-validation: more errors
found, no more healthy texts put in a family)."""
QUIET_THRESHOLD = 0.75
"""Lowest confidence of a verdict on a short text none of whose lines reads as an error (an
autoscaler's or a controller's lines logged at INFO, a status block, a warning in a tool's own
words): such a text is more often healthy, so it must be surer still (chosen on the same
cross-validation from 0.5, 0.65 and 0.75: the higher, the fewer healthy texts put in a family,
for about as many errors found)."""

_STEMS = (
    "error", "exception", "fatal", "fail", "denied", "forbidden", "refused", "unable", "cannot",
    "can't", "couldn't", "could not", "not found", "invalid", "exceed", "exhausted",
    "insufficient", "timed out", "time out", "timeout", "abort", "killed", "panic", "crash",
    "unavailable", "unhealthy", "oom", "backoff", "back-off", "unauthori", "unauthenticated",
    "rejected", "evicted", "preempted", "not allowed", "does not", "doesn't", "didn't",
    "did not", "not supported", "not available", "no such", "missing",
    "unknown", "unsupported", "deadline", "stockout", "stopiteration", "already exists",
    "already in use", "imminent", "exit ", "exited ", "status ", "[warning]", "not_found",
    "already_exists", "out_of_range", "data_loss", "not_met", "out of range", "can not",
    "not a valid", "not an allowed", "not applicable", "low on resource", "sigsegv", "sigabrt",
    "sigbus", "mismatch", "not enough", "unschedulable", "incompatible", "is not valid",
    "isn't valid", "no nodes", "sufficient", "size reached", "violat", "unreachable",
    "no available", "conflict",
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
    r"|imminent|out of range|can not|not an? (?:valid|allowed)|not applicable|low on resource"
    r"|SIG(?:SEGV|ABRT|BUS)|mismatch\w*|not enough|unschedulable|incompatible"
    r"|(?:is not|isn.t) valid|no nodes|not have sufficient|max size reached|violat\w*"
    r"|unreachable|no available|conflict\w*)\b"
    r"|(?-i:\w(?:Error|Exception|Failure|BackOff)\b|\bFailed\w+|\[Warning\]"
    r"|\b[A-Z]{2,}(?:_[A-Z]+)+\b)"
    r"|\b(?:exit|status)(?:ed)? (?:with )?(?:code|status)? ?[1-9]\d*",
    re.IGNORECASE,
)
"""A line that reads as an error: a failure word, an exception or status name, an exit code."""
_GLOG_ERROR = re.compile(r"[EF]\d{4} |\d{4}-\d\d-\d\d[ T][\d:.]+: [EF] ")
"""The prefix of a line glog (``E1224 22:35:53.165575 ...``) or TensorFlow's C++ logging
(``2024-07-29 17:14:59.920189: E external/xla/...``) logged at ERROR or FATAL."""
_LOGGED_INFO = re.compile(r"\s*(?:I\d{4}\s|\[?(?:INFO|DEBUG)\]?[:\s])")
_SOURCE = (
    r"^\s*(?:raise\s|except\b|if\b|def\b|return\b|logger\.|logging\.|print\(|warnings\.warn"
    r"|File \"|\[XPK\]\s+Task:|@\s+0x[0-9a-f]+\s)"
)
"""Source lines and native stack frames shown in tracebacks, and xpk's echo of a task."""
_SOURCE_LINE = re.compile(_SOURCE)
_NOT_ERROR = re.compile(
    r"(?:^|[\s\]|:])(?:INFO|DEBUG)(?:[\s:\]|]|$)"
    r"|^[\d\-:. T]+:?\s+I\s\S+:\d+\]|^\S*\s*I\s\d\d-\d\d\s"
    r"|" + _SOURCE + r"|^(?:(?!Error: ).)*Unable to initialize backend '[^']*':"
    r"(?!.*\((?:set JAX_PLATFORMS|you may need to uninstall))"
    r"|the object has been modified; please apply your changes to the latest version"
    r"|code = Aborted desc = (?:NodePublishVolume request is aborted due to rate limit"
    r"|An operation with the given volume key \S+ already exists)"
    r"|dial tcp \S+:52365: connect: connection refused"
    r"|could not find a node type to satisfy the request: \[(?:\{'bundle_group_\w+': [\d.]+\}(?:, )?)+\]"
    r"|^\s*(?:ERROR\s+)?Reconciler error\s*$"
    r"|^\s*(?-i:[A-Z][A-Z-]*)(?:\s{2,}(?-i:[A-Z][A-Z-]*))+\s*$"
)
"""Lines logged at INFO or DEBUG, source lines and native stack frames (``@ 0x7f... (unknown)``)
shown in tracebacks, and JAX's backend probe
(``Unable to initialize backend '<name>': ...`` logged, not raised: JAX tries every backend it
knows and logs each one that fails at INFO; a raised one follows an exception name or ends with
its ``(set JAX_PLATFORMS=...)`` advice), and Kubernetes' update conflicts (``Operation cannot be
fulfilled on ...: the object has been modified``: a controller re-reads the object and tries
again by itself), a CSI driver's own back-off (``code = Aborted desc = NodePublishVolume request
is aborted due to rate limit``, ``An operation with the given volume key ... already exists``: the
kubelet asks again), Ray's dashboard agent not yet listening (port 52365, refused while it
starts), Ray's autoscaler finding no node type for a placement group's bundles alone
(``[{'bundle_group_...': 0.001}]``: its own message says such a request resolves itself),
controller-runtime's bare ``Reconciler error`` (the words before its JSON fields, whose
``error`` is read on its own), and a table's header of upper-case column names
(``NAME  STATUS  MESSAGE  ERROR``): never classified."""

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_QUOTED = re.compile(r"([\"'`])([^\"'`\s]{1,80})\1")
_PATH = re.compile(r"(?:[\w.@:-]*/){2,}[\w.@:-]*")
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}\b")
_NUMBER = re.compile(r"\d+")
_TELLING_NUMBER = re.compile(r"(?<![\w.])(?:13[79]|143|40[0-49]|429|50[0-4])(?!\w|\.\d)")
"""Numbers that tell a failure apart: exit codes of a killed process (137 SIGKILL, 139 SIGSEGV,
143 SIGTERM) and HTTP statuses (400-404, 409, 429, 500-504), standing alone (not part of a
version, an address or a decimal; a sentence's full stop may follow)."""
_DIGIT_LETTERS = str.maketrans("0123456789", "abcdefghij")
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


def context_line(line: str) -> bool:
    """Whether ``line`` may join an error line's window: any line but those never classified
    (logged at INFO or DEBUG, a traceback's source line, JAX's backend probe...), whose words
    belong to a healthy run."""
    return _LOGGED_INFO.match(line) is None and _NOT_ERROR.search(line) is None


def normalise(text: str) -> str:
    """``text`` lower-cased, with URLs, quoted names, paths, hexadecimal ids and numbers
    replaced by placeholders (``url``, ``name``, ``path``, ``0``), except the numbers that tell
    a failure apart (exit codes, HTTP statuses), spelled as words."""
    text = _URL.sub(" url ", text.lower())
    text = _QUOTED.sub(" name ", text)
    text = _PATH.sub(" path ", text)
    text = _TELLING_NUMBER.sub(_number_word, text)
    return _NUMBER.sub("0", _HEX.sub(" 0 ", text))


def _number_word(m: re.Match[str]) -> str:
    """A telling number as a word of letters (``137`` → ``n_bdh``), so it is a feature."""
    return f" n_{m.group(0).translate(_DIGIT_LETTERS)} "


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
    """A multinomial logistic regression over binary features: per feature, one weight per
    class (in hundredths), a bias per class, and the settings that turn scores into verdicts."""

    classes: tuple[str, ...]
    """The families and :data:`NONE`, sorted."""
    documents: tuple[int, ...]
    """Training texts per class."""
    weights: Mapping[str, tuple[int, ...]]
    """Per feature, its weight for each class (hundredths)."""
    bias: tuple[int, ...]
    """Per class, its bias (hundredths)."""
    threshold: float = THRESHOLD
    """Lowest confidence of a verdict."""

    def to_json(self) -> str:
        """The data file: settings first, then one feature a line (sorted), for short diffs."""
        head = {
            "about": "Built by tools/build_diagnose_classifier.py; do not edit by hand.",
            "threshold": self.threshold,
            "classes": list(self.classes),
            "documents": list(self.documents),
            "bias": list(self.bias),
        }
        lines = [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        body = [
            f"{json.dumps(name)}: {json.dumps(list(row), separators=(',', ':'))}"
            for name, row in sorted(self.weights.items())
        ]
        return "{\n" + "\n".join(lines) + '\n"weights": {\n' + ",\n".join(body) + "\n}}\n"

    @classmethod
    def from_json(cls, text: str) -> Model:
        doc = json.loads(text)
        return cls(
            classes=tuple(doc["classes"]),
            documents=tuple(doc["documents"]),
            weights={name: tuple(row) for name, row in doc["weights"].items()},
            bias=tuple(doc["bias"]),
            threshold=float(doc["threshold"]),
        )


def train(
    examples: Iterable[tuple[str, str]],
    *,
    min_documents: int = 2,
    epochs: int = 5,
    rate: float = 0.5,
    decay: float = 1e-3,
    threshold: float = THRESHOLD,
) -> Model:
    """A model from ``(class, text)`` examples: ``epochs`` passes of stochastic gradient
    descent on the softmax loss (AdaGrad steps of ``rate``, L2 ``decay``; examples in a fixed
    shuffled order, so a build is deterministic). Features held by fewer than
    ``min_documents`` texts are dropped (they name one thread's particulars, not a family's
    vocabulary)."""
    data = [(family, features(text)) for family, text in examples]
    spread: Counter[str] = Counter()
    for _, found in data:
        spread.update(found)
    names = sorted(name for name, n in spread.items() if n >= min_documents)
    index = {name: i for i, name in enumerate(names)}
    classes = tuple(sorted({family for family, _ in data}))
    of_class = {c: i for i, c in enumerate(classes)}
    rows = [(of_class[f], sorted(index[n] for n in found if n in index)) for f, found in data]
    fit = _Fit(len(names), len(classes), rate=rate, decay=decay)
    order = list(range(len(rows)))
    shuffler = random.Random(0)  # noqa: S311 - a fixed order of examples, not a secret
    for _ in range(epochs):
        shuffler.shuffle(order)
        for j in order:
            fit.step(*rows[j])
    docs = Counter(family for family, _ in data)
    return Model(
        classes=classes,
        documents=tuple(docs[c] for c in classes),
        weights={name: tuple(_hundredths(w) for w in fit.w[i]) for name, i in index.items()},
        bias=tuple(_hundredths(b) for b in fit.b),
        threshold=threshold,
    )


def _hundredths(value: float) -> int:
    return round(value * 100)


class _Fit:
    """The weights being fitted, and their AdaGrad sums of squared gradients."""

    SKIP = 1e-3
    """A class whose gradient is smaller than this on an example is not updated by it."""

    def __init__(self, width: int, classes: int, *, rate: float, decay: float) -> None:
        self.w = [[0.0] * classes for _ in range(width)]
        self.g = [[1e-8] * classes for _ in range(width)]
        self.b = [0.0] * classes
        self.gb = [1e-8] * classes
        self.rate, self.decay = rate, decay

    def step(self, label: int, row: Sequence[int]) -> None:
        """One gradient step on an example: class ``label``, features ``row``."""
        if not row:
            return
        scale = 1.0 / math.sqrt(len(row))
        error = _softmax(_scores([self.w[n] for n in row], self.b, scale))
        error[label] -= 1.0
        active = [c for c, e in enumerate(error) if abs(e) > self.SKIP]
        for n in row:
            w, g = self.w[n], self.g[n]
            for c in active:
                grad = error[c] * scale + self.decay * w[c]
                g[c] += grad * grad
                w[c] -= self.rate * grad / math.sqrt(g[c])
        for c in active:
            self.gb[c] += error[c] * error[c]
            self.b[c] -= self.rate * error[c] / math.sqrt(self.gb[c])


def _scores(rows: Sequence[Sequence[float]], bias: Sequence[float], scale: float) -> list[float]:
    """Per class, the bias plus the sum of the feature weights times ``scale`` (a line's
    weights count with 1/sqrt of its number of features, so long and short lines compare)."""
    return [
        sum(column) * scale + b for column, b in zip(zip(*rows, strict=True), bias, strict=True)
    ]


def _softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def window_of(lines: Sequence[str], i: int, context: int = CONTEXT) -> str:
    """Line ``i`` of ``lines`` with the lines within ``context`` before and after it that may
    join a window (:func:`context_line`), as one text."""
    start = max(0, i - context)
    return "\n".join(
        line
        for j, line in enumerate(lines[start : i + context + 1], start)
        if j == i or context_line(line)
    )


def training_examples(
    texts: Iterable[tuple[str, str]], context: int = CONTEXT
) -> list[tuple[str, str]]:
    """``(family, text)`` pairs of a corpus as training examples: an error's whole text under
    its family, and each line of a near-miss (family :data:`NONE`) that reads as an error under
    :data:`NONE` (its other lines are never classified), alone and with the ``context`` lines
    before and after it (the window it is classified in when unsure alone); a near-miss none of
    whose lines reads as an error, whole (as a short quiet text is classified)."""
    examples: list[tuple[str, str]] = []
    for family, text in texts:
        if family != NONE:
            examples.append((family, text))
            continue
        lines = text.splitlines()
        quiet = True
        for i, line in enumerate(lines):
            if not reads_as_error(line):
                continue
            quiet = False
            examples.append((NONE, line))
            window = window_of(lines, i, context)
            if window != line:
                examples.append((NONE, window))
        if quiet and (shown := quiet_text(lines)):
            examples.append((NONE, shown))
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
        self._weights = {name: tuple(w / 100 for w in row) for name, row in model.weights.items()}
        self._bias = tuple(b / 100 for b in model.bias)

    def verdict(self, line: str) -> Verdict | None:
        """The most likely class of ``line`` and its probability, or None when no feature of
        the line is known (the weights summed in the features' sorted order: the same number in
        every process)."""
        rows = [self._weights[f] for f in sorted(features(line)) if f in self._weights]
        if not rows:
            return None
        chances = _softmax(_scores(rows, self._bias, 1.0 / math.sqrt(len(rows))))
        best = max(range(len(chances)), key=chances.__getitem__)
        return Verdict(family=self.model.classes[best], confidence=chances[best])

    def classify(self, line: str, threshold: float | None = None) -> Verdict | None:
        """The family of ``line`` when its most likely class is a family with a confidence at
        ``threshold`` (by default the model's) or above and the line holds what the family
        requires; None otherwise (``none``, unsure, nothing known, another field's wording)."""
        return self._accept(self.verdict(line), line, threshold)

    def alone(self, line: str) -> tuple[Verdict | None, bool]:
        """The family of ``line`` on its own (as :meth:`classify`), and whether its window is
        worth asking: the line is unsure alone (a family below the threshold, or no word the
        model knows), not most likely healthy."""
        found = self.verdict(line)
        accepted = self._accept(found, line, None)
        healthy = found is not None and found.family == NONE
        return accepted, accepted is None and not healthy

    def _accept(self, found: Verdict | None, line: str, threshold: float | None) -> Verdict | None:
        least = self.model.threshold if threshold is None else threshold
        if found is None or found.family == NONE or found.confidence < least:
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
    """The most confident family verdict among ``lines`` that read as errors, each alone or,
    when unsure alone and not most likely healthy, in its window; when none has one, the
    verdict on the whole text if it is short: its lines that may join a window, or, when none
    reads as an error, all its lines at :data:`QUIET_THRESHOLD` (the classifier without
    signatures: how the benchmark measures it)."""
    found: list[Verdict] = []
    erring = False
    for i, line in enumerate(lines):
        if not reads_as_error(line):
            continue
        erring = True
        verdict, unsure = classifier.alone(line)
        if unsure:
            verdict = classifier.classify(window_of(lines, i), WINDOW_THRESHOLD)
        if verdict is not None:
            found.append(verdict)
    if found:
        return max(found, key=lambda v: v.confidence)
    if len(lines) > WHOLE_LINES:
        return None
    whole = read_whole(classifier, lines, erring)
    return None if whole is None else whole[1]


def read_whole(
    classifier: Classifier,
    lines: Sequence[str],
    erring: bool,
    ignore: re.Pattern[str] | None = None,
) -> tuple[int, Verdict] | None:
    """The verdict on a short text nothing was found in, read whole, and the index of its first
    line read: with a line that reads as an error (``erring``), its lines that may join a
    window at :data:`WHOLE_THRESHOLD`; without one, its :func:`quiet_line` lines that
    ``ignore`` (the catalog's echoes) does not match at :data:`QUIET_THRESHOLD`."""
    if erring:
        read = [i for i, line in enumerate(lines) if context_line(line)]
    else:
        read = [
            i
            for i, line in enumerate(lines)
            if quiet_line(line) and (ignore is None or ignore.search(line) is None)
        ]
    if not read:
        return None
    threshold = WHOLE_THRESHOLD if erring else QUIET_THRESHOLD
    verdict = classifier.classify("\n".join(lines[i] for i in read), threshold)
    return None if verdict is None else (read[0], verdict)


def quiet_line(line: str) -> bool:
    """Whether ``line`` joins a short text without an error line when it is read whole: not
    blank, not a traceback's source line (lines logged at INFO are kept: the lines such a text
    is made of)."""
    return bool(line.strip()) and _SOURCE_LINE.match(line) is None


def quiet_text(lines: Iterable[str]) -> str:
    """A short text none of whose lines reads as an error, as it is classified: its
    :func:`quiet_line` lines."""
    return "\n".join(line for line in lines if quiet_line(line))


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
