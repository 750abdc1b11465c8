"""Expanding the words of a training script as bash would, without running anything.

A training script (``MaxText/configs/v5p/llama2_7b.sh``, a recipe's ``scripts/*.sh``) is read
with :mod:`shell_words` and its words are expanded here against the script's own variables
and arguments: ``$NAME`` and ``${NAME:-default}`` (defaults may nest), ``$1``..``${10}``,
``"$@"``, and field splitting of unquoted expansions. A value the tool fills in at submission
(``${BASE_OUTPUT_DIR}``) travels as a sentinel-marked reference and is never looked into.
Command substitution, pattern substitution and arrays are refused with the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tpu_trainer.recipes.shell_words import (
    REF_CLOSE,
    REF_OPEN,
    CmdSub,
    Lit,
    Placeholder,
    Quote,
    Redir,
    Ref,
    ShellSyntaxError,
    Var,
    Word,
    tokenize,
)

_BLANKS = " \t\n"


class ExpansionError(Exception):
    """A word the reader cannot expand as bash would; ``line`` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Scope:
    """The variables and arguments of one running script."""

    values: dict[str, str] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    nounset: bool = False
    """``set -u``: expanding an unset variable stops the script."""
    used: set[str] = field(default_factory=set)
    """Every variable an expansion looked up."""

    def child(self, args: list[str]) -> Scope:
        """The scope of a script this one runs with ``bash``: exported variables only."""
        kept = {k: v for k, v in self.values.items() if k in self.exported}
        return Scope(kept, set(kept), list(args))

    def lookup(self, name: str) -> str | None:
        self.used.add(name)
        if name.isdigit():
            index = int(name)
            return self.args[index - 1] if 0 < index <= len(self.args) else None
        return self.values.get(name)


def symbolic(name: str) -> str:
    """The text standing for a value filled in at submission (``${NAME}`` once rendered)."""
    return REF_OPEN + name + REF_CLOSE


def render(text: str) -> str:
    """Sentinel-marked references as ``${NAME}``."""
    return text.replace(REF_OPEN, "${").replace(REF_CLOSE, "}")


def is_symbolic(text: str) -> bool:
    return REF_OPEN in text


class _Fields:
    """Fields being built from a word's parts: quoted text joins the current field, unquoted
    expansions split on blanks."""

    def __init__(self) -> None:
        self.fields: list[str] = []
        self.current: str | None = None

    def join(self, text: str) -> None:
        self.current = (self.current or "") + text

    def split(self, text: str) -> None:
        if not text:
            return
        pieces = text.split()
        if text[0] in _BLANKS:
            self.end()
        for i, piece in enumerate(pieces):
            if i:
                self.end()
            self.join(piece)
        if text[-1] in _BLANKS:
            self.end()

    def end(self) -> None:
        if self.current is not None:
            self.fields.append(self.current)
        self.current = None

    def done(self) -> list[str]:
        self.end()
        return self.fields


def expand_fields(word: Word, scope: Scope) -> list[str]:
    """The fields ``word`` becomes (none for an unquoted empty expansion; ``"$@"`` gives one
    field per argument)."""
    if not word.parts:
        return [""]  # `""` or `''`
    out = _Fields()
    for part in word.parts:
        if isinstance(part, Var) and part.name == "@":
            _all_args(part, scope, out, len(word.parts) == 1)
        elif isinstance(part, Var):
            value = _var(part, scope, word.line)
            if part.quote is Quote.NONE:
                out.split(value)
            else:
                out.join(value)
        else:
            out.join(_plain(part, word.line))
    return out.done()


def expand_text(word: Word, scope: Scope) -> str:
    """``word`` as one string, with no field splitting (an assignment's value, a here-string,
    a double-quoted ``--command``)."""
    out: list[str] = []
    for part in word.parts:
        if isinstance(part, Var):
            value = " ".join(scope.args) if part.name == "@" else _var(part, scope, word.line)
            out.append(value)
        else:
            out.append(_plain(part, word.line))
    return "".join(out)


def _all_args(part: Var, scope: Scope, out: _Fields, whole: bool) -> None:
    if part.quote is Quote.NONE:
        for arg in scope.args:
            out.split(arg)
        return
    if not whole:
        raise ExpansionError('"$@" is read only as a word of its own', 0)
    for arg in scope.args:
        out.join(arg)
        out.end()


def _plain(part: Lit | Ref | CmdSub | Placeholder | Redir | Var, line: int) -> str:
    if isinstance(part, Lit):
        return part.text
    if isinstance(part, Ref):
        return symbolic(part.name)
    if isinstance(part, Placeholder):
        return "<" + part.name + ">"
    if isinstance(part, CmdSub):
        raise ExpansionError(
            f"command substitution $({part.text}) is not supported: the tool never runs "
            "commands from a recipe",
            line,
        )
    raise ExpansionError(f"unexpected `{part}`", line)


def _var(part: Var, scope: Scope, line: int) -> str:
    if part.indirect or (part.pattern and not part.pattern.startswith(":-")):
        shown = "${" + ("!" if part.indirect else "") + part.name + part.pattern + "}"
        raise ExpansionError(f"the expansion {shown} is not supported in a training script", line)
    value = scope.lookup(part.name)
    if part.pattern:
        if value:
            return value
        return _default(part.pattern[2:], part.quote, scope, line)
    if value is None:
        if scope.nounset:
            raise ExpansionError(
                f"${part.name} is unset and the script runs with `set -u`: bash stops here", line
            )
        return ""
    return value


def _default(text: str, quote: Quote, scope: Scope, line: int) -> str:
    """The default of ``${NAME:-text}``: quotes and expansions in it read as bash does."""
    wrapped = f'"{text}"' if quote is Quote.DOUBLE else text
    try:
        tokens = tokenize(wrapped, line, expansions=True, positional=True)
    except ShellSyntaxError as e:
        raise ExpansionError(f"in a default value: {e}", e.line) from None
    words = [t for t in tokens if isinstance(t, Word)]
    if len(words) != len(tokens):
        raise ExpansionError(f"the default value `{text}` is not one word", line)
    return " ".join(expand_text(w, scope) for w in words)


def read_fields(text: str, names: list[str], ifs: str) -> dict[str, str]:
    """What ``IFS=<ifs> read -r NAME... <<< "text"`` assigns (one line; ``ifs`` one character
    that is not a blank, or bash's default blanks)."""
    line = text.split("\n", 1)[0]
    if ifs in (_BLANKS, " "):
        pieces = line.split(None, len(names) - 1)
    elif len(ifs) == 1:
        pieces = line.split(ifs, len(names) - 1)
        rest = pieces[-1] if len(pieces) == len(names) else None
        if rest is not None and rest.endswith(ifs) and ifs not in rest[:-1]:
            pieces[-1] = rest[:-1]  # one field and its delimiter left: bash drops the delimiter
    else:
        raise ExpansionError(f"`read` with IFS={ifs!r} is not supported", 0)
    pieces += [""] * (len(names) - len(pieces))
    return dict(zip(names, pieces, strict=True))


def test_condition(words: list[str], exists: Mapping[str, bool | None], line: int) -> bool:
    """The value of ``[ ... ]`` / ``[[ ... ]]`` / ``test ...`` over expanded words: ``!``,
    ``-n``, ``-z``, ``=``/``==``/``!=``, and ``-f``/``-e``/``-d`` on files the tool knows."""
    if words and words[0] == "!":
        return not test_condition(words[1:], exists, line)
    if len(words) == 2 and words[0] in ("-n", "-z"):
        if is_symbolic(words[1]):
            return words[0] == "-n"  # a value the tool fills in is never empty
        return bool(words[1]) == (words[0] == "-n")
    if len(words) == 2 and words[0] in ("-f", "-e", "-d"):
        known = exists.get(words[1])
        if known is None:
            raise ExpansionError(f"whether {words[1]} exists in the image is not known", line)
        return known
    if len(words) == 3 and words[1] in ("=", "==", "!="):
        left, right = words[0], words[2]
        if is_symbolic(left) or is_symbolic(right):
            raise ExpansionError(
                f"the test `{render(' '.join(words))}` depends on a value the tool fills in "
                "at submission",
                line,
            )
        return (left == right) == (words[1] != "!=")
    if len(words) == 1:
        return bool(words[0])
    raise ExpansionError(f"the test `{render(' '.join(words))}` is not supported", line)
