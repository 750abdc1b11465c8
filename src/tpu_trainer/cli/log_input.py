"""Reading a log named on the command line: a file (gzip too) or ``-`` for standard input."""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from tpu_trainer.errors import InputError


@contextmanager
def open_log(log: str, command: str, example: str) -> Iterator[TextIO]:
    """Standard input for ``-``, else the file (gzip-compressed when it ends in ``.gz``).

    ``command`` (``collect``, ``diagnose``) and ``example`` (a pipeline using it) go into the
    errors' next steps.
    """
    if log == "-":
        yield sys.stdin
        return
    path = Path(log).expanduser()
    if not path.is_file():
        what = "is a directory, not a log file" if path.is_dir() else "does not exist"
        raise InputError(
            f"{log} {what}",
            fix=f"Give the path of a saved log, or - to read standard input, e.g. `{example}`.",
        )
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as gz:
                yield gz
        else:
            with path.open(encoding="utf-8", errors="replace") as fh:
                yield fh
    except OSError as e:
        raise InputError(
            f"cannot read {log}: {e.strerror or e}",
            fix=f"Check the file's permissions, or pipe it in: `cat <log> | tpu-trainer {command} -`.",
        ) from None
