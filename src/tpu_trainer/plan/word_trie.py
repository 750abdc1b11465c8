"""One regular expression that finds any of many literal words, fast."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import cast


def trie_pattern(words: Sequence[str]) -> str:
    """One regular expression that finds any of ``words``: their common beginnings are
    written once, so that each position of a text is tried against a few first characters
    instead of every word."""
    root: dict[str, dict[str, object]] = {}
    for word in words:
        node = root
        for char in word:
            node = cast(dict[str, dict[str, object]], node.setdefault(char, {}))
        node[""] = {}

    def expression(node: Mapping[str, object]) -> str:
        branches = [
            re.escape(char) + expression(cast(Mapping[str, object], rest))
            for char, rest in sorted(node.items())
            if char
        ]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return expression(root)
