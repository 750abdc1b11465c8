"""What the fake ``tpu-vm ssh`` understands of a command: its shape, read from its words.

Nothing here runs the command or hands it to a shell. Each line is split into words as a POSIX
shell splits them (:func:`shlex.split`) and matched word for word against the shapes of the
commands a run sends (written below with ``{NAME}`` where a value goes); a value must be the
same wherever its name appears. The train command's program (``sh -c`` text) is split the same
way, so the fake reads its environment, interpreter and arguments as words. A ``{NAME_Q}`` is
text the worker's shell reads again as one word (a file named inside ``"$(cat ...)"``): it is
split once more and bound to ``NAME``. Anything else is :attr:`Shape.UNKNOWN`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from enum import StrEnum


class Shape(StrEnum):
    INSTALL = "install"
    DEVICES = "devices"
    TRAIN = "train"
    ATTACH = "attach"
    STOP = "stop"
    LEFT = "left"
    UNKNOWN = "unknown"


_FOLLOW = (
    'tail -n +1 --pid="$(cat train.pid)" -f train.log',
    'if [ -s train.exit ]; then exit "$(cat train.exit)"; fi',
    "exit {STATUS}",
)
_TRAIN = (
    "cd {DIR} || exit 1",
    "rm -f train.exit train.pid",
    "echo {SEGMENT} > train.segment",
    ": > train.log",
    "setsid nohup sh -c {PROGRAM} > train.log 2>&1 < /dev/null &",
    "echo $! > train.pid",
    *_FOLLOW,
)
_ATTACH = ("cd {DIR} || exit 1", *_FOLLOW)
_STOP = (
    'if [ -f {PIDFILE} ]; then kill -TERM -"$(cat {PIDFILE_Q})" 2>/dev/null || true; '
    'tail --pid="$(cat {PIDFILE_Q})" -f /dev/null; fi',
)
_LEFT = (
    "cd {DIR} 2>/dev/null || exit 0",
    'if [ -f train.pid ] && kill -0 "$(cat train.pid)" 2>/dev/null; then '
    'echo TPU_TRAINER_RUNNING "$(cat train.segment 2>/dev/null)"; elif [ -f train.exit ]; '
    'then echo TPU_TRAINER_ENDED "$(cat train.segment 2>/dev/null)"; fi',
)
_SHAPED = ((Shape.TRAIN, _TRAIN), (Shape.ATTACH, _ATTACH), (Shape.STOP, _STOP), (Shape.LEFT, _LEFT))
_INNER = ("trap : TERM", "{PROGRAM}", "echo $? > train.exit")
_INSTALL = re.compile(r"\buv\"? pip install --quiet --python \S+/bin/python ")
_DEVICES = re.compile(r"-c 'import jax; print\(\"TPU_TRAINER_DEVICES\", ")
_PLACE = re.compile(r"\{([A-Z]+(?:_Q)?)\}")


@dataclass(frozen=True, slots=True)
class Command:
    shape: Shape
    folder: str = ""
    """The run's folder on the workers (train, attach, stop, left)."""
    segment: int | None = None
    program: tuple[str, ...] = field(default=())
    """The train command's program: ``env``, its variables, the interpreter, its arguments."""

    @property
    def program_text(self) -> str:
        return " ".join(self.program)


def parse(command: str) -> Command:
    if _INSTALL.search(command):
        return Command(Shape.INSTALL)
    if _DEVICES.search(command):
        return Command(Shape.DEVICES)
    for shape, template in _SHAPED:
        found = _match_lines(command, template)
        if found is None:
            continue
        if shape is Shape.STOP:
            folder, _, name = found["PIDFILE"].rpartition("/")
            return Command(shape, folder) if name == "train.pid" else Command(Shape.UNKNOWN)
        if shape is not Shape.TRAIN:
            return Command(shape, folder=found["DIR"])
        program = _program(found["PROGRAM"])
        if program is None or not found["SEGMENT"].isdigit():
            return Command(Shape.UNKNOWN)
        return Command(shape, found["DIR"], int(found["SEGMENT"]), program)
    return Command(Shape.UNKNOWN)


def _program(text: str) -> tuple[str, ...] | None:
    lines = _lines(text)
    if len(lines) != len(_INNER) or lines[0] != _INNER[0] or lines[2] != _INNER[2]:
        return None
    words = _words(lines[1])
    if not words or words[0] != "env":
        return None
    return tuple(words)


def _words(line: str) -> list[str] | None:
    try:
        return shlex.split(line)
    except ValueError:
        return None


def _lines(text: str) -> list[str]:
    """``text`` cut at each newline outside quotes (a quoted newline stays in its word)."""
    lines, start, quote, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is taken as it is
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "\n":
            lines.append(text[start:i])
            start = i + 1
        i += 1
    return [*lines, text[start:]]


def _match_lines(command: str, template: tuple[str, ...]) -> dict[str, str] | None:
    lines = _lines(command)
    if len(lines) != len(template):
        return None
    bound: dict[str, str] = {}
    for line, shape in zip(lines, template, strict=True):
        words = _words(line)
        pattern = shlex.split(shape)
        if words is None or len(words) != len(pattern):
            return None
        for word, want in zip(words, pattern, strict=True):
            if not _match_word(word, want, bound):
                return None
    return bound


def _match_word(word: str, want: str, bound: dict[str, str]) -> bool:
    names = _PLACE.findall(want)
    if not names:
        return word == want
    regex = "".join(
        f"(?P<{part}>.+)" if i % 2 else re.escape(part) for i, part in enumerate(_PLACE.split(want))
    )
    m = re.fullmatch(regex, word, re.S)
    if m is None:
        return False
    for name in names:
        value: str | None = m[name]
        if name.endswith("_Q"):  # read again by the shell as one word
            again = _words(m[name])
            value = again[0] if again is not None and len(again) == 1 else None
        if value is None or bound.setdefault(name.removesuffix("_Q"), value) != value:
            return False
    return True
