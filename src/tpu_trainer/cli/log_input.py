"""Reading a log named on the command line: a file (gzip too) or ``-`` for standard input.

The first block of the input is looked at before anything is parsed: gzip data is unpacked
whatever the file is called, and empty input or binary data (NUL bytes, or text that is not
UTF-8) is refused with an error that says what to give instead.
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO, Protocol, TextIO

from tpu_trainer.errors import InputError

SNIFF_BYTES = 8192
"""How much of the input is looked at to tell text from binary."""
MAX_UNDECODABLE = 0.01
"""Share of bytes that may fail to decode as UTF-8 before the input counts as binary."""
_GZIP_MAGIC = b"\x1f\x8b"


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@contextmanager
def open_log(log: str, command: str, example: str) -> Iterator[TextIO]:
    """Standard input for ``-``, else the file; gzip data is unpacked.

    ``command`` (``collect``, ``diagnose``) and ``example`` (a pipeline using it) go into the
    errors' next steps.
    """
    name = "standard input" if log == "-" else log
    with ExitStack() as stack:
        try:
            raw = _open_raw(log, example, stack)
            yield _text(raw, name, command, example, stack)
        except OSError as e:
            raise InputError(
                f"cannot read {name}: {e.strerror or e}",
                fix=f"Check the file's permissions, or pipe it in: `cat <log> | tpu-trainer {command} -`.",
            ) from None


def _open_raw(log: str, example: str, stack: ExitStack) -> BinaryIO:
    if log == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        return buffer if buffer is not None else io.BytesIO(sys.stdin.read().encode("utf-8"))
    path = Path(log).expanduser()
    if not path.is_file():
        what = "is a directory, not a log file" if path.is_dir() else "does not exist"
        raise InputError(
            f"{log} {what}",
            fix=f"Give the path of a saved log, or - to read standard input, e.g. `{example}`.",
        )
    return stack.enter_context(path.open("rb"))


def _text(raw: BinaryIO, name: str, command: str, example: str, stack: ExitStack) -> TextIO:
    """``raw`` as text, after checking its first block (unpacking gzip on the way)."""
    head = raw.read(SNIFF_BYTES)
    stream = _Rewound(head, raw)
    if head.startswith(_GZIP_MAGIC):
        unpacked = stack.enter_context(gzip.GzipFile(fileobj=stream, mode="rb"))
        try:
            head = unpacked.read(SNIFF_BYTES)
        except (OSError, EOFError) as e:
            raise InputError(
                f"{name} looks gzip-compressed but cannot be unpacked: {e}",
                fix=f"Unpack it first (`gunzip -c <log> | tpu-trainer {command} -`).",
            ) from None
        stream = _Rewound(head, unpacked)
    _check_head(head, name, command, example)
    return io.TextIOWrapper(
        io.BufferedReader(stream), encoding="utf-8", errors="replace", newline=None
    )


def _check_head(head: bytes, name: str, command: str, example: str) -> None:
    if not head.strip():
        raise InputError(
            f"{name} is empty: there is no log text to read",
            fix=f"Give a log that has the run's output, e.g. `{example}`; `kubectl logs` "
            "prints nothing for a pod that has not started (see `kubectl describe pod <pod>`).",
        )
    undecodable = head.decode("utf-8", errors="replace").count("\ufffd")
    if b"\x00" in head or undecodable > MAX_UNDECODABLE * len(head):
        raise InputError(
            f"{name} is binary data, not a text log",
            fix=f"Give the text log itself (a saved `kubectl logs` or training output, plain or "
            f".gz), e.g. `{example}`; `file <log>` shows what the file is, and `tpu-trainer "
            f"{command}` reads UTF-8 text.",
        )


class _Rewound(io.RawIOBase):
    """``head`` (already read) followed by the rest of ``rest``, as one readable stream."""

    def __init__(self, head: bytes, rest: _Readable) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        target = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(target), len(self._head))
            target[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(target))
        target[: len(data)] = data
        return len(data)
