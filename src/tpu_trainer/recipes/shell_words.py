"""A reader for the small subset of bash that recipe scripts are written in.

Nothing is ever executed. Text becomes tokens: words made of parts (literal text, variable
references, command substitutions, placeholders) and operators, each with its line number.
Constructs outside the subset raise :class:`ShellSyntaxError` with the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum


class ShellSyntaxError(Exception):
    """Text the reader does not accept; ``line`` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class Quote(StrEnum):
    NONE = "none"
    SINGLE = "single"
    DOUBLE = "double"


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal characters (quote removal already done)."""

    text: str
    quote: Quote = Quote.NONE


@dataclass(frozen=True, slots=True)
class Var:
    """``$NAME`` or ``${NAME}``; ``pattern`` keeps any ``${NAME//a/b}`` operator text."""

    name: str
    quote: Quote = Quote.NONE
    pattern: str = ""
    indirect: bool = False
    """``${!NAME}``: the variable NAME names (bash's indirect expansion)."""


@dataclass(frozen=True, slots=True)
class CmdSub:
    """``$(...)``: kept as text, never run."""

    text: str
    quote: Quote = Quote.NONE


@dataclass(frozen=True, slots=True)
class Ref:
    """A variable of the submitting shell, already resolved to "stays symbolic" by an outer
    expansion: in the pod's command it reads ``${NAME}`` but is filled in at submission."""

    name: str
    quote: Quote = Quote.NONE


@dataclass(frozen=True, slots=True)
class Placeholder:
    """``<your-gcs-bucket-path>``: a value the recipe's author left for the user."""

    name: str


@dataclass(frozen=True, slots=True)
class Redir:
    """A redirection in a pod command (``2>&1``, ``&> /dev/null``): kept with its command as
    written, never an argument."""

    text: str


Part = Lit | Var | Ref | CmdSub | Placeholder | Redir


@dataclass(frozen=True, slots=True)
class Word:
    parts: tuple[Part, ...]
    line: int

    @property
    def literal(self) -> str | None:
        """The word's text when it is made of literal parts only, else None."""
        if all(isinstance(p, Lit) for p in self.parts):
            return "".join(p.text for p in self.parts if isinstance(p, Lit))
        return None

    def render(self) -> str:
        """Readable text: literals as they are, references as ``${NAME}``."""
        return "".join(render_part(p) for p in self.parts)


def render_part(part: Part) -> str:
    if isinstance(part, Lit):
        return part.text
    if isinstance(part, Var):
        return "${" + ("!" if part.indirect else "") + part.name + part.pattern + "}"
    if isinstance(part, Ref):
        return "${" + part.name + "}"
    if isinstance(part, CmdSub):
        return "$(" + part.text + ")"
    if isinstance(part, Redir):
        return part.text
    return "<" + part.name + ">"


@dataclass(frozen=True, slots=True)
class Op:
    """An operator: ``&&``, ``||``, ``|``, ``;``, ``&``, newline, ``<``, ``>``, ``&>``, ``>>``."""

    text: str
    line: int


Token = Word | Op

_NAME_START = re.compile(r"[A-Za-z_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_POSITIONAL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|@")
"""With ``positional=True``: names, and the script's own arguments (``$1``, ``${10}``, ``$@``)."""
_PLACEHOLDER = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>")
_OPERATORS = ("&&", "||", "&>", ">>", "|", ";", "&", "<", ">", "(", ")")
# Sentinels standing for a variable kept symbolic inside an already expanded string.
REF_OPEN = "\x01"
REF_CLOSE = "\x02"


class _Lexer:
    def __init__(
        self,
        text: str,
        first_line: int = 1,
        expansions: bool = False,
        redirects: bool = False,
        positional: bool = False,
    ) -> None:
        self.s = text
        self.i = 0
        self.line = first_line
        self.expansions = expansions
        self.redirects = redirects
        self.positional = positional

    def error(self, message: str) -> ShellSyntaxError:
        return ShellSyntaxError(message, self.line)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def tokens(self) -> Iterator[Token]:
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                self.i += 2
                self.line += 1
                continue
            if c in " \t\r":
                self.i += 1
                continue
            if c == "\n":
                yield Op("\n", self.line)
                self.i += 1
                self.line += 1
                continue
            if c == "#":
                while self.i < len(self.s) and self.peek() != "\n":
                    self.i += 1
                continue
            if c == "<" and _PLACEHOLDER.match(self.s, self.i):
                yield self.word()
                continue
            if self.redirects and (redirect := _REDIRECT.match(self.s, self.i)) is not None:
                yield self.redirection(redirect)
                continue
            op = next((o for o in _OPERATORS if self.s.startswith(o, self.i)), None)
            if op is not None:
                if op in ("(", ")"):
                    raise self.error(f"subshells and groups '{op}' are not supported")
                yield Op(op, self.line)
                self.i += len(op)
                continue
            yield self.word()

    def redirection(self, m: re.Match[str]) -> Word:
        """``2>&1`` or ``&> FILE`` / ``> FILE`` / ``>> FILE`` with a literal target."""
        line = self.line
        self.i = m.end()
        if m.group("dup"):
            return Word((Redir(m.group(0)),), line)
        while self.peek() in (" ", "\t"):
            self.i += 1
        target = self.word() if self.peek() not in ("", "\n", ";", "&", "|") else None
        if target is None or target.literal is None or not target.literal:
            raise self.error(f"redirection '{m.group(0).strip()}' needs a plain file name")
        return Word((Redir(f"{m.group(0)} {target.literal}"),), line)

    def word(self) -> Word:  # noqa: PLR0915 (one loop over the kinds of character)
        start_line = self.line
        parts: list[Part] = []
        buf: list[str] = []

        def flush(quote: Quote = Quote.NONE) -> None:
            if buf:
                parts.append(Lit("".join(buf), quote))
                buf.clear()

        while self.i < len(self.s):
            c = self.peek()
            if c in " \t\r\n" or (c in "&|;()") or (c == ">"):
                break
            if c == "<":
                m = _PLACEHOLDER.match(self.s, self.i)
                if m is None:
                    break
                flush()
                parts.append(Placeholder(m.group(1)))
                self.i = m.end()
                continue
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.i += 2
                    self.line += 1
                    continue
                flush()
                parts.append(Lit(nxt, Quote.SINGLE))
                self.i += 2
                continue
            if c == "'":
                flush()
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise self.error("unterminated single quote")
                text = self.s[self.i + 1 : end]
                self.line += text.count("\n")
                parts.extend(_split_refs(text, Quote.SINGLE))
                self.i = end + 1
                continue
            if c == '"':
                flush()
                self.i += 1
                parts.extend(self.double_quoted())
                continue
            if c == "$":
                flush()
                parts.append(self.dollar(Quote.NONE))
                continue
            if c == "`":
                raise self.error("backquote command substitution is not supported")
            if c == REF_OPEN:
                flush()
                end = self.s.index(REF_CLOSE, self.i)
                parts.append(Ref(self.s[self.i + 1 : end]))
                self.i = end + 1
                continue
            buf.append(c)
            self.i += 1
        flush()
        return Word(tuple(parts), start_line)

    def double_quoted(self) -> list[Part]:
        parts: list[Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(Lit("".join(buf), Quote.DOUBLE))
                buf.clear()

        while True:
            if self.i >= len(self.s):
                raise self.error("unterminated double quote")
            c = self.peek()
            if c == '"':
                self.i += 1
                break
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.i += 2
                    self.line += 1
                elif nxt in '$`"\\':
                    buf.append(nxt)
                    self.i += 2
                else:
                    buf.append(c)
                    self.i += 1
                continue
            if c == "$":
                flush()
                parts.append(self.dollar(Quote.DOUBLE))
                continue
            if c == "`":
                raise self.error("backquote command substitution is not supported")
            if c == REF_OPEN:
                flush()
                end = self.s.index(REF_CLOSE, self.i)
                parts.append(Ref(self.s[self.i + 1 : end], Quote.DOUBLE))
                self.i = end + 1
                continue
            if c == "\n":
                self.line += 1
            buf.append(c)
            self.i += 1
        flush()
        return parts

    def dollar(self, quote: Quote) -> Part:
        nxt = self.peek(1)
        if nxt == "(":
            if self.peek(2) == "(":
                raise self.error("arithmetic expansion $((...)) is not supported")
            return self.command_substitution(quote)
        if nxt == "{":
            end = _brace_end(self.s, self.i + 2) if self.expansions else self.s.find("}", self.i)
            if end < 0:
                raise self.error("unterminated ${...}")
            inner = self.s[self.i + 2 : end]
            indirect = self.expansions and inner.startswith("!")
            name = _POSITIONAL if self.positional else _NAME
            m = name.match(inner, 1 if indirect else 0)
            if m is None or (indirect and m.end() != len(inner)):
                raise self.error(f"unsupported parameter expansion '${{{inner}}}'")
            rest = inner[m.end() :]
            allowed = _EXPANSIONS if self.expansions else ("//",)
            if rest and not rest.startswith(allowed):
                raise self.error(f"unsupported parameter expansion '${{{inner}}}'")
            self.line += inner.count("\n")
            self.i = end + 1
            return Var(m.group(0), quote, rest, indirect)
        m = (_POSITIONAL if self.positional else _NAME).match(self.s, self.i + 1)
        if self.positional and m is not None and m.group(0)[0].isdigit():
            self.i += 2  # `$12` is `${1}2`
            return Var(nxt, quote)
        if m is None:
            if nxt in "?!$#@*0123456789-":
                raise self.error(f"special parameter '${nxt}' is not supported")
            self.i += 1
            return Lit("$", quote)
        self.i = m.end()
        return Var(m.group(0), quote)

    def command_substitution(self, quote: Quote) -> CmdSub:
        depth = 0
        j = self.i + 1
        in_single = False
        in_double = False
        while j < len(self.s):
            c = self.s[j]
            if c == "\\" and not in_single:
                j += 2
                continue
            if c == "'" and not in_double:
                in_single = not in_single
            elif c == '"' and not in_single:
                in_double = not in_double
            elif not in_single and not in_double:
                if c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth == 0:
                        text = self.s[self.i + 2 : j]
                        self.line += text.count("\n")
                        self.i = j + 1
                        return CmdSub(text, quote)
            j += 1
        raise self.error("unterminated $(...)")


def _split_refs(text: str, quote: Quote) -> list[Part]:
    """Literal text that may hold sentinel-marked references."""
    parts: list[Part] = []
    for i, piece in enumerate(re.split(f"{REF_OPEN}([^{REF_CLOSE}]*){REF_CLOSE}", text)):
        if i % 2:
            parts.append(Ref(piece, quote))
        elif piece:
            parts.append(Lit(piece, quote))
    return parts


_REDIRECT = re.compile(r"(?:\d*>&(?P<dup>\d+|-)|&>>?|\d*>>?|\d*<)(?![>&|])")
"""A redirection where a word starts (``redirects=True``): a descriptor copy (``2>&1``) or an
operator whose file name follows."""
_EXPANSIONS = ("//", ":-", "[")
"""Operators after a name that ``expansions=True`` accepts: ``${A//x/y}``, ``${A:-default}``
(defaults may nest ``${...}`` and ``$(...)``), ``${A[@]}`` and ``${A[0]}``."""


def _brace_end(s: str, i: int) -> int:
    """Index of the ``}`` closing a ``${`` whose name starts at ``i`` (-1 when none)."""
    depth = 1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if s.startswith("${", i) or s.startswith("$(", i):
            depth += 1
            i += 2
            continue
        if c in "})":
            depth -= 1
            if depth == 0:
                return i if c == "}" else -1
        i += 1
    return -1


def tokenize(
    text: str,
    first_line: int = 1,
    expansions: bool = False,
    redirects: bool = False,
    positional: bool = False,
) -> list[Token]:
    """Split ``text`` into words and operators (comments and line continuations removed);
    ``expansions`` also accepts the parameter expansions of :data:`_EXPANSIONS` and ``${!NAME}``,
    ``redirects`` reads redirections as :class:`Redir` words (a pod command's ``2>&1``),
    ``positional`` the script's arguments (``$1``, ``${2:-default}``, ``"$@"``) as :class:`Var`
    parts named ``1``, ``2``, ``@``."""
    return list(_Lexer(text, first_line, expansions, redirects, positional).tokens())


def split_commands(tokens: list[Token], separators: frozenset[str]) -> list[tuple[list[Word], str]]:
    """Group words into simple commands ended by one of ``separators`` (the separator returned)."""
    commands: list[tuple[list[Word], str]] = []
    current: list[Word] = []
    for tok in tokens:
        if isinstance(tok, Op):
            if tok.text in separators:
                if current:
                    commands.append((current, tok.text))
                current = []
                continue
            raise ShellSyntaxError(
                f"operator '{tok.text.strip() or 'newline'}' is not supported here", tok.line
            )
        current.append(tok)
    if current:
        commands.append((current, ""))
    return commands
