"""Quoting for the shells a recipe's words pass through: one word back as the same
characters (:func:`quote_for_shell`, :func:`dq_escape`), and whether a spliced value would turn
into shell syntax in the pod's shell (:func:`pod_text_problem`)."""

from __future__ import annotations

import re

from tpu_trainer.recipes.shell_words import CmdSub, Op, Quote, ShellSyntaxError, tokenize

_SAFE = re.compile(r"^[A-Za-z0-9_./:=,+@%^-]+$")


def quote_for_shell(text: str) -> str:
    """Quote ``text`` so a POSIX shell reads it back as one word with the same characters."""
    if text and _SAFE.match(text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def dq_escape(text: str) -> str:
    """Escape ``text`` for the inside of a bash double-quoted string."""
    return re.sub(r'([\\"`$])', r"\\\1", text)


SHELL_SPECIAL = frozenset({"IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PATH"})
"""Variables the shell itself reads: a recipe or a ``--var`` never sets or splices them."""
_OP_NAMES = {"\n": "a newline"}


def pod_quote_state(text: str) -> Quote:
    """The quoting in force at the end of ``text`` as a shell reads it."""
    state = Quote.NONE
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and state is not Quote.SINGLE:
            i += 2
            continue
        if c == "'" and state is not Quote.DOUBLE:
            state = Quote.NONE if state is Quote.SINGLE else Quote.SINGLE
        elif c == '"' and state is not Quote.SINGLE:
            state = Quote.NONE if state is Quote.DOUBLE else Quote.DOUBLE
        i += 1
    return state


def pod_text_problem(text: str, state: Quote) -> tuple[str, str]:
    """What in ``text`` would be shell syntax when spliced into a command where ``state``
    quoting is in force, and the characters that make it; ("", "") when it stays plain words."""
    if state is Quote.SINGLE:
        return ("a single quote", "'") if "'" in text else ("", "")
    if state is Quote.DOUBLE:
        found = next((c for c in ('"', "`", "$(", "\\") if c in text), None)
        return (f"`{found}`", found) if found else ("", "")
    try:
        tokens = tokenize(text)
    except ShellSyntaxError as e:
        return str(e), ""
    for tok in tokens:
        if isinstance(tok, Op):
            return "the shell operator " + _OP_NAMES.get(tok.text, f"`{tok.text}`"), tok.text
        if any(isinstance(p, CmdSub) for p in tok.parts):
            return "a command substitution", "$("
    return "", ""
