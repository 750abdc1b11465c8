"""Write a run into the model's README without ever losing what is already there.

The README follows the template of the training runbook: a model overview, then a
"my runs" table (``### 我的测试记录`` / ``### My runs``) with one row per run, then one
detailed section per run with its per-step metrics. **The "my runs" table is the model's
run history**: every run of the model adds exactly one row to it, so it lists all of them.

Rules, in the order they matter:

* Existing text is never rewritten. A new run inserts one row after the last row of the
  "my runs" table and appends its detailed section at the end of the file; everything else
  stays byte for byte as it was (line endings, a byte-order mark and a missing final newline
  included). A file without such a table gets a new results section at the end instead.
* Each run leaves an invisible marker, ``<!-- tpu-trainer run <run_id> -->``, in its row and
  its section. A run whose marker is already in the file is not added again; a run carried on
  (``tpu-trainer resume``) has its row and section replaced by the whole run's, when they are
  still as the tool wrote them (else they are left as they are).
* The read-modify-write happens under an exclusive lock, and the new text replaces the file
  atomically, so concurrent writers neither lose nor duplicate runs and a reader never sees
  half a file. The lock file lives in the run store's folder (``locks/``), keyed by the
  README's path, so nothing but the README and its charts is left in the recipes tree.
* Only a regular file is written: a README that is a symbolic link, a folder or read-only is
  refused with the reason, and nothing is changed.
* A run that did not succeed, or that was a rehearsal on the fake cloud, says so in its row
  and its section heading.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.infra.files import LockTimeout, atomic_write, file_lock
from tpu_trainer.report.model import RunReport
from tpu_trainer.report.sections import (
    LABELS,
    MY_RUNS_TITLES,
    Labels,
    Lang,
    ledger_line,
    marker,
    norm,
    render_readme,
    run_cells,
    run_section,
    runs_table,
    table_row,
)

__all__ = [
    "Lang",
    "add_run",
    "check_writable",
    "lock_path",
    "marker",
    "render_readme",
    "update_readme",
]

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_DELIMITER = re.compile(r" {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def update_readme(
    path: Path,
    run: RunReport,
    *,
    lang: Lang = "zh",
    plots: Sequence[Path] = (),
    lock_timeout: float = 120.0,
    lock_dir: Path | None = None,
    previous: RunReport | None = None,
) -> bool:
    """Record ``run`` in the README at ``path``, creating it from the template when missing.

    ``plots`` are image files linked (relative to the README) from the run's section. The
    lock is taken in ``lock_dir`` (default: the run store's ``locks/`` folder). ``previous``:
    what the README was given for this run before (a run carried on), replaced by ``run``.
    Returns False when the run was already recorded (the file is then left untouched).
    """
    if lang not in LABELS:
        raise InputError(
            f"unknown README language {lang!r}", fix=f"use one of: {', '.join(LABELS)}"
        )
    check_writable(path, run.run_id)
    links = [_relative_link(p, path) for p in plots]
    lock = lock_path(path, lock_dir)
    try:
        with file_lock(lock, timeout=lock_timeout):
            check_writable(path, run.run_id)
            return _update_locked(path, run, lang, links, previous)
    except LockTimeout as exc:
        raise TpuTrainerError(
            f"another process has held the lock on {path} for over {lock_timeout:.0f}s",
            fix=f"wait for it to finish; if none is running, delete {lock}",
        ) from exc
    except OSError as exc:
        raise TpuTrainerError(
            f"cannot write {path}: {exc.strerror or exc}; it was left as it was",
            fix=_later(path, run.run_id),
        ) from exc


def refresh_figures(
    path: Path, old: RunReport, new: RunReport, *, lock_dir: Path | None = None
) -> bool:
    """Put ``new``'s figures in place of ``old``'s in the README at ``path`` (the run's row
    and its section's goodput line, in the language they were written in). Returns False
    when the README does not hold ``old``'s text as written (edited by hand, or missing):
    it is then left as it is."""
    if not path.is_file():
        return False
    check_writable(path, new.run_id)
    with file_lock(lock_path(path, lock_dir), timeout=120.0):
        text = path.read_text(encoding="utf-8")
        changed = replace_figures(text, old, new)
        if changed == text:
            return False
        atomic_write(path, changed.encode("utf-8"))
        return True


def replace_figures(text: str, old: RunReport, new: RunReport) -> str:
    """``text`` with ``old``'s row and goodput line replaced by ``new``'s (pure)."""

    def pairs(lab: Labels, header: list[str] | None) -> list[tuple[str, str]]:
        ledger = (ledger_line(old, lab), ledger_line(new, lab))
        both = [ledger, *_row_pair(old, new, header, lab)]
        return [(a.rstrip("\n"), b.rstrip("\n")) for a, b in both]

    changed = _swap_in_its_language(text, pairs)
    return text if changed is None else changed


def replace_run(
    text: str, old: RunReport, new: RunReport, *, plot_links: Sequence[str] = ()
) -> str | None:
    """``text`` with ``old``'s row and section replaced by ``new``'s, in the language they were
    written in (pure); None when they are not in it as written (edited by hand)."""
    nl = "\r\n" if "\r\n" in text else "\n"

    def pairs(lab: Labels, header: list[str] | None) -> list[tuple[str, str]]:
        section = (run_section(old, lab, plot_links), run_section(new, lab, plot_links))
        both = [section, *_row_pair(old, new, header, lab)]
        return [(a.replace("\n", nl), b.replace("\n", nl)) for a, b in both]

    return _swap_in_its_language(text, pairs)


def _row_pair(
    old: RunReport, new: RunReport, header: list[str] | None, lab: Labels
) -> list[tuple[str, str]]:
    """``old``'s and ``new``'s rows of the "my runs" table (none without a table)."""
    if header is None:
        return []
    return [(table_row(run_cells(old, header, lab)), table_row(run_cells(new, header, lab)))]


def _swap_in_its_language(
    text: str, pairs_for: Callable[[Labels, list[str] | None], list[tuple[str, str]]]
) -> str | None:
    """``text`` with each pair's first text replaced by its second (once), in the first
    language all of whose first texts ``text`` holds; None when it holds no language's."""
    found = _find_runs_table(_split_lines(text))
    header = found[1] if found is not None else None
    for lab in LABELS.values():
        pairs = pairs_for(lab, header)
        if all(before and before in text for before, _ in pairs):
            for before, after in pairs:
                text = text.replace(before, after, 1)
            return text
    return None


def _later(path: Path, run_id: str) -> str:
    return (
        f"fix {path} (or its folder), then `tpu-trainer report {run_id}` writes the run's "
        "section; its metrics are in the run store"
    )


def check_writable(path: Path, run_id: str) -> None:
    """Refuse a target that is a symbolic link, a folder or read-only, or whose folder is
    missing: the run's text is only ever written into a regular file the user can write."""
    if path.is_symlink():
        raise InputError(
            f"{path} is a symbolic link (to {path.readlink()}); not writing through it",
            fix=f"replace the link with a regular file, or remove it; {_later(path, run_id)}",
        )
    if not path.parent.is_dir():
        raise InputError(
            f"cannot write {path}: folder {path.parent} does not exist",
            fix="pass the README path inside the model's folder",
        )
    if path.is_dir():
        raise InputError(
            f"{path} is a folder, not a file; not writing the report",
            fix=f"move the folder away; {_later(path, run_id)}",
        )
    if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & _WRITE):
        raise InputError(
            f"{path} is read-only; it was not replaced",
            fix=f"make it writable (chmod u+w {path}); {_later(path, run_id)}",
        )


_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def lock_path(path: Path, lock_dir: Path | None = None) -> Path:
    """The lock file serializing writers of the README at ``path``: one per resolved path, in
    ``lock_dir`` (default: the run store's ``locks/`` folder), never beside the README."""
    if lock_dir is None:
        from tpu_trainer.store.file import default_path, locks_dir

        lock_dir = locks_dir(default_path())
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TpuTrainerError(
            f"cannot make the lock folder {lock_dir}: {exc.strerror or exc}",
            fix="make the run store's folder writable, or set TPU_TRAINER_HOME to one that is",
        ) from exc
    real = path.parent.resolve() / path.name
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:24]
    return lock_dir / f"readme-{key}.lock"


def _update_locked(
    path: Path, run: RunReport, lang: Lang, links: list[str], previous: RunReport | None
) -> bool:
    if not path.exists():
        atomic_write(path, render_readme(run, lang=lang, plot_links=links).encode())
        return True
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text; not touching it",
            fix="convert it to UTF-8, or write the report to another file",
        ) from exc
    new = add_run(text, run, lang=lang, plot_links=links)
    if new is None and previous is not None and previous != run:
        new = replace_run(text, previous, run, plot_links=links)
    if new is None:
        return False
    atomic_write(path, new.encode("utf-8"))
    return True


def add_run(
    text: str, run: RunReport, *, lang: Lang = "zh", plot_links: Sequence[str] = ()
) -> str | None:
    """``text`` with ``run``'s row and section added, or None when it is already there."""
    if marker(run.run_id) in text:
        return None
    lab = LABELS[lang]
    nl = "\r\n" if "\r\n" in text else "\n"
    if not text.strip():
        return text + render_readme(run, lang=lang, plot_links=plot_links).replace("\n", nl)
    lines = _split_lines(text)
    found = _find_runs_table(lines)
    if found is None:
        block = f"## {lab.results}\n\n### {lab.my_runs}\n\n{runs_table(run, lab)}\n"
        text = _append(text, block.replace("\n", nl), nl)
    else:
        text = _insert_row(lines, *found, run, lab, nl)
    return _append(text, run_section(run, lab, plot_links).replace("\n", nl), nl)


def _insert_row(
    lines: list[str], at: int, header: list[str] | None, run: RunReport, lab: Labels, nl: str
) -> str:
    """The lines with the run's row inserted before line ``at`` (a new table if no header)."""
    if header is not None:
        insert = table_row(run_cells(run, header, lab))
    else:
        insert = "\n" + runs_table(run, lab)
        if at < len(lines) and lines[at].strip():
            insert += "\n"
    if at > 0 and not lines[at - 1].endswith("\n"):
        insert = "\n" + insert
    return "".join([*lines[:at], insert.replace("\n", nl), *lines[at:]])


# -- finding the "my runs" table ------------------------------------------------------------


def _split_lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _code_lines(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (fences included)."""
    flags: list[bool] = []
    fence = ""
    for line in lines:
        m = _FENCE.match(line)
        if fence:
            flags.append(True)
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not (line.strip()[len(m.group(1)) :].strip())
            ):
                fence = ""
        else:
            flags.append(m is not None)
            fence = m.group(1) if m else ""
    return flags


def _heading(line: str) -> tuple[int, str] | None:
    m = _HEADING.fullmatch(line.rstrip("\r\n").lstrip("\ufeff"))
    return (len(m.group(1)), m.group(2) or "") if m else None


def _find_runs_table(lines: Sequence[str]) -> tuple[int, list[str] | None] | None:
    """Where to insert a row (line index) and the table's header cells.

    The header is None when the "my runs" heading has no table yet (insert a whole table
    after the heading); the result is None when there is no such heading at all.
    """
    code = _code_lines(lines)
    for start, line in enumerate(lines):
        head = None if code[start] else _heading(line)
        if head is None or norm(head[1]) not in MY_RUNS_TITLES:
            continue
        for i in range(start + 1, len(lines)):
            sub = None if code[i] else _heading(lines[i])
            if sub is not None and sub[0] <= head[0]:
                break
            if _is_table_start(lines, code, i):
                end = i + 2
                while end < len(lines) and _is_table_row(lines[end], code[end]):
                    end += 1
                return end, _cells(lines[i])
        return start + 1, None
    return None


def _is_table_start(lines: Sequence[str], code: Sequence[bool], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and not code[i]
        and not code[i + 1]
        and lines[i].lstrip(" ").startswith("|")
        and _DELIMITER.fullmatch(lines[i + 1].rstrip("\r\n")) is not None
    )


def _is_table_row(line: str, in_code: bool) -> bool:
    body = line.strip()
    return bool(body) and not in_code and _heading(line) is None and not body.startswith(">")


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|")
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in _CELL_SPLIT.split(body)]


def _append(text: str, block: str, nl: str) -> str:
    """``text`` followed by a blank line and ``block``."""
    if not text:
        return block
    if not text.endswith("\n"):
        text += nl
    if not text.endswith(nl + nl) and text.strip():
        text += nl
    return text + block


def _relative_link(plot: Path, readme: Path) -> str:
    rel = os.path.relpath(plot.absolute(), readme.absolute().parent)
    return quote(Path(rel).as_posix(), safe="/._-~")
