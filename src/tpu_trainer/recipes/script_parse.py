"""The statements of a training script: simple commands, ``if``/``elif``/``else`` blocks and
``for`` loops, read from :mod:`shell_words` tokens (positional parameters and here-strings
included). Only the grammar; :mod:`script_eval` gives it meaning."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.shell_words import Op, ShellSyntaxError, Token, Word, tokenize

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Simple:
    words: tuple[Word, ...]
    line: int
    here: Word | None = None
    """A here-string (``<<< "$ARG"``)."""


@dataclass(frozen=True, slots=True)
class IfBlock:
    branches: tuple[tuple[tuple[Simple, ...], tuple[Node, ...]], ...]
    """``(condition, body)`` of ``if`` and each ``elif``."""
    otherwise: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class ForLoop:
    name: str
    items: tuple[Word, ...]
    body: tuple[Node, ...]
    line: int


Node = Simple | IfBlock | ForLoop


class ScriptParser:
    """Statements of a script: simple commands, ``if`` and ``for`` blocks."""

    def __init__(self, tokens: list[Token], where: str) -> None:
        self.tokens = tokens
        self.i = 0
        self.where = where

    def fail(self, message: str, line: int) -> RecipeError:
        return RecipeError(f"{self.where}:{line}: {message}", fix="")

    def block(self, ends: frozenset[str]) -> tuple[tuple[Node, ...], str]:
        nodes: list[Node] = []
        while self.i < len(self.tokens):
            tok = self.tokens[i := self.i]
            if isinstance(tok, Op) and tok.text in ("\n", ";", "&&"):
                self.i = i + 1
                continue
            if isinstance(tok, Op):
                raise self.fail(f"operator '{tok.text}' is not supported in a script", tok.line)
            head = tok.literal
            if head in ends:
                self.i += 1
                return tuple(nodes), head or ""
            if head == "if":
                nodes.append(self.if_block())
            elif head == "for":
                nodes.append(self.for_block())
            else:
                nodes.append(self.simple())
        if ends:
            raise self.fail(f"missing `{sorted(ends)[-1]}`", self.line())
        return tuple(nodes), ""

    def line(self) -> int:
        last = self.tokens[-1] if self.tokens else None
        return last.line if last is not None else 0

    def simple(self) -> Simple:
        words: list[Word] = []
        here: Word | None = None
        line = self.tokens[self.i].line
        while self.i < len(self.tokens):
            tok = self.tokens[self.i]
            if isinstance(tok, Op) and tok.text == "<" and self._here_string():
                here = self.tokens[self.i + 3]  # type: ignore[assignment]
                self.i += 4
                continue
            if isinstance(tok, Op):
                if tok.text in ("\n", ";", "&&"):
                    break
                raise self.fail(f"operator '{tok.text}' is not supported in a script", tok.line)
            words.append(tok)
            self.i += 1
        return Simple(tuple(words), line, here)

    def _here_string(self) -> bool:
        ahead = self.tokens[self.i : self.i + 4]
        return (
            len(ahead) == 4
            and all(isinstance(t, Op) and t.text == "<" for t in ahead[:3])
            and isinstance(ahead[3], Word)
        )

    def condition(self, keyword: str) -> tuple[Simple, ...]:
        body, end = self.block(frozenset({"then"}))
        if end != "then" or not all(isinstance(n, Simple) for n in body):
            raise self.fail(f"`{keyword}` needs a plain test before `then`", self.line())
        return tuple(n for n in body if isinstance(n, Simple))

    def if_block(self) -> IfBlock:
        self.i += 1
        branches: list[tuple[tuple[Simple, ...], tuple[Node, ...]]] = []
        cond = self.condition("if")
        while True:
            body, end = self.block(frozenset({"elif", "else", "fi"}))
            branches.append((cond, body))
            if end == "elif":
                cond = self.condition("elif")
                continue
            otherwise: tuple[Node, ...] = ()
            if end == "else":
                otherwise, _ = self.block(frozenset({"fi"}))
            return IfBlock(tuple(branches), otherwise)

    def for_block(self) -> ForLoop:
        line = self.tokens[self.i].line
        self.i += 1
        head = self.simple()
        words = [w.literal for w in head.words]
        if len(words) < 2 or words[1] != "in" or not _IDENTIFIER.fullmatch(words[0] or ""):
            raise self.fail("a `for` loop is read only as `for NAME in WORDS; do ...; done`", line)
        while self.i < len(self.tokens) and isinstance(self.tokens[self.i], Op):
            self.i += 1
        if self.i >= len(self.tokens) or self.tokens[self.i].literal != "do":  # type: ignore[union-attr]
            raise self.fail("`for` without `do`", line)
        self.i += 1
        body, _ = self.block(frozenset({"done"}))
        return ForLoop(words[0] or "", head.words[2:], body, line)


def parse_script(text: str, where: str) -> tuple[Node, ...]:
    try:
        tokens = tokenize(text, expansions=True, positional=True)
    except ShellSyntaxError as e:
        raise RecipeError(f"{where}:{e.line}: {e}", fix="") from None
    nodes, _ = ScriptParser(tokens, where).block(frozenset())
    return nodes
