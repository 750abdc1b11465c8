"""A known error found in a log: what ``diagnose`` reports for one signature or one family
classified by its wording, and the helpers that fill its fix and cut its excerpt."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.error_signatures import Severity

EXCERPT_CHARS = 300
"""Longest excerpt of a matched line."""
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A ``{field}`` of a cause or fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """A signature found in a log (once per signature: the first line, and how many lines)."""

    signature: str
    """The signature's id."""
    family: str
    """The id of the signature's family (out-of-memory, scheduling, ...)."""
    title: str
    cause: str
    """Why it happens, with the match's values filled in."""
    fix: str
    """The command or setting that fixes it, with the match's values filled in."""
    severity: Severity
    line: int
    """1-based number of the first line that matched (the first of two for a wrapped match)."""
    excerpt: str
    """The matched text, at most :data:`EXCERPT_CHARS` characters around the match."""
    source: str = ""
    """Where the signature is documented (a seed document or a public issue or page)."""
    extracted: tuple[tuple[str, str], ...] = ()
    """The fields the pattern extracted (sizes, names, zones), in pattern order."""
    specificity: int = 2
    """3 an exact message, 2 a family's usual wording, 1 a catch-all, 0 a line the family
    classifier put in the family (no signature matched it)."""
    column: int = 0
    """0-based position of the match in its line (the leading message of a line ranks first)."""
    count: int = 1
    """How many lines matched this signature."""
    transient: bool = False
    """The signature says the error goes away by itself (a run may retry it)."""
    confidence: float | None = None
    """A classified match's confidence (0–1); None for a signature's match."""

    @property
    def classified(self) -> bool:
        """True for a family-level match of the classifier (no signature matched its line)."""
        return self.specificity == 0

    def to_json(self) -> dict[str, object]:
        """One entry of the ``diagnose --json`` ``matches`` list."""
        return {
            "family": self.family,
            "signature": self.signature,
            "line": self.line,
            "extracted": dict(self.extracted),
            "cause": self.cause,
            "fix": self.fix,
            "source": self.source,
            "matched": self.excerpt,
            "count": self.count,
            "title": self.title,
            "severity": self.severity,
            "specificity": self.specificity,
            "confidence": self.confidence,
        }


def fill(template: str, values: Mapping[str, str | None]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]``; names without a value
    become ``<name>`` (a value for the user to put in); an empty value (a derived sentence with
    nothing to say) is left out. Other braces (JSON, jsonpath) are left alone."""

    def one(m: re.Match[str]) -> str:
        value = values.get(m.group(1))
        return f"<{m.group(1)}>" if value is None else value

    return PLACEHOLDER.sub(one, template)


def excerpt(text: str, start: int, end: int) -> str:
    """At most :data:`EXCERPT_CHARS` characters of ``text``, trimmed, showing ``[start, end)``
    (from its beginning when that fits, else from a little before the match)."""
    text = text.strip() if len(text) <= EXCERPT_CHARS else text
    if len(text) <= EXCERPT_CHARS:
        return text
    begin = 0 if end <= EXCERPT_CHARS - 1 else max(0, start - 40)
    piece = text[begin : begin + EXCERPT_CHARS - 2].strip()
    return ("…" if begin else "") + piece + "…"
