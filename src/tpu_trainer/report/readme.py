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
  its section. A run whose marker is already in the file is not added again.
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
import math
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from unicodedata import east_asian_width
from urllib.parse import quote, unquote

from filelock import FileLock, Timeout

from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.report.model import Outcome, ReportLang, RunReport, step_figures
from tpu_trainer.store.steps import StepRow

Lang = Literal["zh", "en"]

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_DELIMITER = re.compile(r" {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_COLUMNS = "date|config|precision|step_time|tflops_device|tflops_chip|tokens_chip|loss|note"


def _split(cells: str) -> tuple[str, ...]:
    return tuple(cells.split("|"))


@dataclass(frozen=True, slots=True)
class _Labels:
    code: str
    title: str
    overview: str
    overview_rows: str
    """Item, value, then model, params, hardware, framework, JAX, libtpu, XPK."""
    results: str
    my_runs: str
    runs_header: str
    """One per entry of ``_COLUMNS``."""
    log_heading: str
    steps_header: str
    steady: str
    loss_drop: str
    run: str
    no_steps: str


_ZH = _Labels(
    code="zh",
    title="{model} 训练测试记录",
    overview="模型概况",
    overview_rows="项目|值|模型|总参数量|硬件|框架|JAX|Libtpu|XPK",
    results="测试结果",
    my_runs="我的测试记录",
    runs_header="日期|配置|Precision|Step Time (s)|TFLOPs/s/device|TFLOPs/s/chip|Tokens/s/chip"
    "|Loss (final)|备注",
    log_heading="详细训练日志 - {topology} ({date})",
    steps_header="Step|耗时 (s)|TFLOP/s/device|TFLOP/s/chip|Tokens/s/chip|Loss",
    steady="稳态性能 (Step {steps})",
    loss_drop="Loss 下降",
    run="运行",
    no_steps="（没有逐步指标）",
)
_EN = _Labels(
    code="en",
    title="{model} training record",
    overview="Model overview",
    overview_rows="Item|Value|Model|Total parameters|Hardware|Framework|JAX|Libtpu|XPK",
    results="Results",
    my_runs="My runs",
    runs_header="Date|Config|Precision|Step Time (s)|TFLOPs/s/device|TFLOPs/s/chip|Tokens/s/chip"
    "|Loss (final)|Note",
    log_heading="Training log - {topology} ({date})",
    steps_header="Step|Time (s)|TFLOP/s/device|TFLOP/s/chip|Tokens/s/chip|Loss",
    steady="Steady state (step {steps})",
    loss_drop="Loss drop",
    run="Run",
    no_steps="(no per-step metrics)",
)
_LABELS: dict[str, _Labels] = {ReportLang.ZH: _ZH, ReportLang.EN: _EN}
_REHEARSAL = "rehearsal"
_MARKS: dict[str, dict[str, str]] = {
    "zh": {
        Outcome.FAILED: "失败",
        Outcome.TIMED_OUT: "超时",
        Outcome.CANCELLED: "已取消",
        Outcome.UNFINISHED: "未结束",
        _REHEARSAL: "演练（假云，非实测）",
    },
    "en": {
        Outcome.FAILED: "FAILED",
        Outcome.TIMED_OUT: "TIMED OUT",
        Outcome.CANCELLED: "CANCELLED",
        Outcome.UNFINISHED: "UNFINISHED",
        _REHEARSAL: "REHEARSAL (fake cloud, not a measurement)",
    },
}


def _norm(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split()).casefold()


_MY_RUNS_TITLES = frozenset({_norm(_ZH.my_runs), _norm(_EN.my_runs)})
_EXTRA_ALIASES = (
    "step time=step_time|tflop/s/device=tflops_device|tflop/s/chip=tflops_chip|loss=loss"
    "|final loss=loss|notes=note|configuration=config|topology=topology|拓扑=topology"
    "|chips=chips|run=run_id|run id=run_id"
)
_COLUMN_ALIASES: dict[str, str] = {
    **{
        _norm(h): key
        for lab in (_ZH, _EN)
        for h, key in zip(_split(lab.runs_header), _split(_COLUMNS), strict=True)
    },
    **dict(pair.split("=") for pair in _split(_EXTRA_ALIASES)),
}


def marker(run_id: str) -> str:
    """The invisible comment that identifies a run's row and section in a README."""
    return f"<!-- tpu-trainer run {run_id} -->"


def update_readme(
    path: Path,
    run: RunReport,
    *,
    lang: Lang = "zh",
    plots: Sequence[Path] = (),
    lock_timeout: float = 120.0,
    lock_dir: Path | None = None,
) -> bool:
    """Record ``run`` in the README at ``path``, creating it from the template when missing.

    ``plots`` are image files linked (relative to the README) from the run's section. The
    lock is taken in ``lock_dir`` (default: the run store's ``locks/`` folder).
    Returns False when the run was already recorded (the file is then left untouched).
    """
    if lang not in _LABELS:
        raise InputError(
            f"unknown README language {lang!r}", fix=f"use one of: {', '.join(_LABELS)}"
        )
    check_writable(path, run.run_id)
    links = [_relative_link(p, path) for p in plots]
    lock = lock_path(path, lock_dir)
    try:
        with FileLock(lock, timeout=lock_timeout):
            check_writable(path, run.run_id)
            return _update_locked(path, run, lang, links)
    except Timeout as exc:
        raise TpuTrainerError(
            f"another process has held the lock on {path} for over {lock_timeout:.0f}s",
            fix=f"wait for it to finish; if none is running, delete {lock}",
        ) from exc
    except OSError as exc:
        raise TpuTrainerError(
            f"cannot write {path}: {exc.strerror or exc}; it was left as it was",
            fix=_later(path, run.run_id),
        ) from exc


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
        from tpu_trainer.store.db import default_path

        lock_dir = default_path().parent / "locks"
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


def _update_locked(path: Path, run: RunReport, lang: Lang, links: list[str]) -> bool:
    if not path.exists():
        atomic_write_bytes(path, render_readme(run, lang=lang, plot_links=links).encode())
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
    if new is None:
        return False
    atomic_write_bytes(path, new.encode("utf-8"))
    return True


def render_readme(run: RunReport, *, lang: Lang = "zh", plot_links: Sequence[str] = ()) -> str:
    """A new README holding just ``run``."""
    lab = _LABELS[lang]
    rows = _split(lab.overview_rows)
    framework = f"{run.framework} ({run.framework_version})".removesuffix(" ()")
    values = (run.model, run.params, run.hardware, framework, *(v for _, v in _versions(run)[1:]))
    overview = [(name, value or "—") for name, value in zip(rows[2:], values, strict=True)]
    return (
        f"# {lab.title.format(model=_inline(run.model))}\n\n"
        f"## {lab.overview}\n\n{_table(rows[:2], overview)}\n"
        f"## {lab.results}\n\n### {lab.my_runs}\n\n"
        f"{_runs_table(run, lab)}\n"
        f"{_section(run, lab, plot_links)}"
    )


def add_run(
    text: str, run: RunReport, *, lang: Lang = "zh", plot_links: Sequence[str] = ()
) -> str | None:
    """``text`` with ``run``'s row and section added, or None when it is already there."""
    if marker(run.run_id) in text:
        return None
    lab = _LABELS[lang]
    nl = "\r\n" if "\r\n" in text else "\n"
    if not text.strip():
        return text + render_readme(run, lang=lang, plot_links=plot_links).replace("\n", nl)
    lines = _split_lines(text)
    found = _find_runs_table(lines)
    if found is None:
        block = f"## {lab.results}\n\n### {lab.my_runs}\n\n{_runs_table(run, lab)}\n"
        text = _append(text, block.replace("\n", nl), nl)
    else:
        text = _insert_row(lines, *found, run, lab, nl)
    return _append(text, _section(run, lab, plot_links).replace("\n", nl), nl)


def _insert_row(
    lines: list[str], at: int, header: list[str] | None, run: RunReport, lab: _Labels, nl: str
) -> str:
    """The lines with the run's row inserted before line ``at`` (a new table if no header)."""
    if header is not None:
        insert = _row(_run_cells(run, header, lab))
    else:
        insert = "\n" + _runs_table(run, lab)
        if at < len(lines) and lines[at].strip():
            insert += "\n"
    if at > 0 and not lines[at - 1].endswith("\n"):
        insert = "\n" + insert
    return "".join([*lines[:at], insert.replace("\n", nl), *lines[at:]])


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (a temporary file in the same folder)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        if head is None or _norm(head[1]) not in _MY_RUNS_TITLES:
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


# -- rendering ------------------------------------------------------------------------------


def _append(text: str, block: str, nl: str) -> str:
    """``text`` followed by a blank line and ``block``."""
    if not text:
        return block
    if not text.endswith("\n"):
        text += nl
    if not text.endswith(nl + nl) and text.strip():
        text += nl
    return text + block


def _inline(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    delimiter = "|" + "|".join("-" * max(3, _width(h) + 2) for h in header) + "|\n"
    return _row(header) + delimiter + "".join(_row(r) for r in rows)


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospaced editor (CJK characters take two)."""
    return sum(2 if east_asian_width(c) in "WF" else 1 for c in text)


def _runs_table(run: RunReport, lab: _Labels) -> str:
    header = _split(lab.runs_header)
    return _table(header, [_run_cells(run, header, lab)])


def _num(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def _marks(run: RunReport, lab: _Labels) -> str:
    """What the run was, when it is not a successful measurement ("FAILED · REHEARSAL ...")."""
    marks = _MARKS[lab.code]
    found = [marks[run.outcome]] if run.outcome is not Outcome.SUCCEEDED else []
    return " · ".join([*found, *([marks[_REHEARSAL]] if run.rehearsal else [])])


def _run_cells(run: RunReport, header: Sequence[str], lab: _Labels) -> list[str]:
    marks = _marks(run, lab)
    note = "; ".join(n for n in (f"**{marks}**" if marks else "", run.note) if n)
    values = {
        "date": run.date,
        "config": _cell(run.config_name),
        "precision": _cell(run.precision),
        "step_time": _num(run.steady_step_seconds, 2),
        "tflops_device": _num(run.steady_tflops_device, 1),
        "tflops_chip": _num(run.steady_tflops_chip, 1),
        "tokens_chip": _num(run.steady_tokens_chip, 1),
        "loss": _num(run.final_loss, 3),
        "note": _cell(note),
        "topology": _cell(run.topology),
        "chips": str(run.chips),
        "run_id": run.run_id,
    }
    keys = [_COLUMN_ALIASES.get(_norm(h), "") for h in header]
    cells = [values.get(key, "") for key in keys] or [""]
    if marks and "note" not in keys:
        cells[-1] = f"**{marks}** {cells[-1]}".rstrip()
    cells[-1] = f"{cells[-1]} {marker(run.run_id)}".lstrip()
    return cells


def _steps_label(run: RunReport) -> str:
    chosen = sorted(set(run.steady_steps))
    if not chosen:
        return ""
    last = max((s.step for s in run.steps), default=chosen[-1])
    if chosen == list(range(chosen[0], chosen[-1] + 1)):
        if chosen[-1] >= last:
            return f"{chosen[0]}+"
        return f"{chosen[0]}–{chosen[-1]}"
    return ", ".join(str(s) for s in chosen)


def _section(run: RunReport, lab: _Labels, plot_links: Sequence[str]) -> str:
    heading = lab.log_heading.format(topology=_inline(run.topology), date=run.date)
    marks = _marks(run, lab)
    heading += f" — {marks}" if marks else ""
    rows = [_step_cells(s) for s in run.steps]
    steps = _steps_label(run)
    steady = lab.steady.format(steps=steps) if steps else lab.steady.split(" (")[0]
    drop = run.loss_drop_percent
    facts = [
        f"`{run.run_id}`",
        f"`{_inline(run.config_name)}`",
        f"{run.chips} chips ({_inline(run.device_type)})",
        *(_inline(f"{name} {version}") for name, version in _versions(run) if version),
    ]
    parts = [
        f"### {heading}\n{marker(run.run_id)}\n\n",
        _table(_split(lab.steps_header), rows) if rows else f"{lab.no_steps}\n",
        "\n",
        f"- **{steady}**: ~{_num(run.steady_step_seconds, 2)} s/step, "
        f"~{_num(run.steady_tflops_chip, 1)} TFLOP/s/chip, "
        f"~{_num(run.steady_tokens_chip, 1)} Tokens/s/chip\n",
        f"- **{lab.loss_drop}**: {_num(run.loss_first, 3)} → {_num(run.loss_last, 3)} "
        f"({'n/a' if drop is None else _num(drop, 1) + '%'})\n",
        f"- **{lab.run}**: {' · '.join(facts)}\n",
        *(f"\n![{_alt(link)}]({link})\n" for link in plot_links),
    ]
    return "".join(parts)


def _versions(run: RunReport) -> tuple[tuple[str, str], ...]:
    """The framework, JAX, libtpu and XPK versions the run used."""
    return (
        (run.framework, run.framework_version),
        ("JAX", run.jax_version),
        ("libtpu", run.libtpu_version),
        ("XPK", run.xpk_version),
    )


def _step_cells(s: StepRow) -> tuple[str, ...]:
    tflops_device, tflops_chip, tokens_chip, loss = step_figures(s)
    return (
        str(s.step),
        _num(s.seconds, 2),
        _num(tflops_device, 1),
        _num(tflops_chip, 1),
        _num(tokens_chip, 1),
        _num(loss, 3),
    )


def _alt(link: str) -> str:
    return unquote(link.rsplit("/", 1)[-1].rsplit(".", 1)[0])


def _relative_link(plot: Path, readme: Path) -> str:
    rel = os.path.relpath(plot.absolute(), readme.absolute().parent)
    return quote(Path(rel).as_posix(), safe="/._-~")
