"""The text a run adds to a README: its row in the "my runs" table, its detailed section, and
a whole new README holding just the run; in Chinese or English (``--lang``).

Each run's row and section carry an invisible marker, ``<!-- tpu-trainer run <run_id> -->``
(:func:`marker`). Numbers a run lacks are written ``n/a``. Where the text goes in an existing
README, and how it is written, is :mod:`tpu_trainer.report.readme`'s business.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from operator import lt
from typing import Literal
from unicodedata import east_asian_width
from urllib.parse import unquote

from tpu_trainer.report.downsample import Stat, StepBucket
from tpu_trainer.report.model import Outcome, ReportLang, RunReport, step_figures
from tpu_trainer.report.step_table import ranges
from tpu_trainer.store.steps import StepRow

Lang = Literal["zh", "en"]

_COLUMNS = (
    "date|config|precision|step_time|tflops_device|tflops_chip|tokens_chip|loss"
    "|goodput|largest_badput|cost|note"
)


def _split(cells: str) -> tuple[str, ...]:
    return tuple(cells.split("|"))


@dataclass(frozen=True, slots=True)
class Labels:
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
    steady_ranges: str
    """A long run's steady steps: ``{ranges}`` of steps and their ``{count}``."""
    loss_drop: str
    run: str
    no_steps: str
    summarised: str
    """How a long run's step table was summarised."""
    charts: str
    goodput: str
    """The section's goodput line: ``{goodput}``, ``{badput}``, ``{cost}``."""


_ZH = Labels(
    code="zh",
    title="{model} 训练测试记录",
    overview="模型概况",
    overview_rows="项目|值|模型|总参数量|硬件|框架|JAX|Libtpu|XPK",
    results="测试结果",
    my_runs="我的测试记录",
    runs_header="日期|配置|Precision|Step Time (s)|TFLOPs/s/device|TFLOPs/s/chip|Tokens/s/chip"
    "|Loss (final)|Goodput|最大 Badput|成本 (USD)|备注",
    log_heading="详细训练日志 - {topology} ({date})",
    steps_header="Step|耗时 (s)|TFLOP/s/device|TFLOP/s/chip|Tokens/s/chip|Loss",
    steady="稳态性能 (Step {steps})",
    steady_ranges="{ranges}，共 {count:,} 步",
    loss_drop="Loss 下降",
    run="运行",
    no_steps="（没有逐步指标）",
    summarised="共 {steps} 步，表格已汇总：前 {first} 步和最后 {last} 步为日志原值；"
    "其余每行汇总 {width} 步，格式为 均值 (最小–最大)。",
    charts="图表每 {width} 步画出均值和最小–最大范围（单步尖峰仍可见）。",
    goodput="- **Goodput**：{goodput}（最大 badput：{badput}）；**成本**：{cost}"
    "（含拆除阶段；`tpu-trainer show` 给出各阶段）\n",
)
_EN = Labels(
    code="en",
    title="{model} training record",
    overview="Model overview",
    overview_rows="Item|Value|Model|Total parameters|Hardware|Framework|JAX|Libtpu|XPK",
    results="Results",
    my_runs="My runs",
    runs_header="Date|Config|Precision|Step Time (s)|TFLOPs/s/device|TFLOPs/s/chip|Tokens/s/chip"
    "|Loss (final)|Goodput|Largest badput|Cost (USD)|Note",
    log_heading="Training log - {topology} ({date})",
    steps_header="Step|Time (s)|TFLOP/s/device|TFLOP/s/chip|Tokens/s/chip|Loss",
    steady="Steady state (step {steps})",
    steady_ranges="{ranges}; {count:,} steps",
    loss_drop="Loss drop",
    run="Run",
    no_steps="(no per-step metrics)",
    summarised="{steps} steps, summarised: the first {first} and the last {last} steps as "
    "logged; each other row covers {width} steps as mean (min–max).",
    charts="The charts draw the mean and the min–max range of each {width} steps "
    "(a one-step spike stays visible).",
    goodput="- **Goodput**: {goodput} (largest badput: {badput}); **cost**: {cost} "
    "(teardown included; `tpu-trainer show` has each phase)\n",
)
LABELS: dict[str, Labels] = {ReportLang.ZH: _ZH, ReportLang.EN: _EN}
_REHEARSAL = "rehearsal"
_MARKS: dict[str, dict[str, str]] = {
    "zh": {
        Outcome.FAILED: "失败",
        Outcome.TIMED_OUT: "超时",
        Outcome.CANCELLED: "已取消",
        Outcome.INTERRUPTED: "被中断",
        Outcome.UNFINISHED: "未结束",
        _REHEARSAL: "演练（假云，非实测）",
    },
    "en": {
        Outcome.FAILED: "FAILED",
        Outcome.TIMED_OUT: "TIMED OUT",
        Outcome.CANCELLED: "CANCELLED",
        Outcome.INTERRUPTED: "INTERRUPTED",
        Outcome.UNFINISHED: "UNFINISHED",
        _REHEARSAL: "REHEARSAL (fake cloud, not a measurement)",
    },
}


def norm(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split()).casefold()


MY_RUNS_TITLES = frozenset({norm(_ZH.my_runs), norm(_EN.my_runs)})
_EXTRA_ALIASES = (
    "step time=step_time|tflop/s/device=tflops_device|tflop/s/chip=tflops_chip|loss=loss"
    "|final loss=loss|notes=note|configuration=config|topology=topology|拓扑=topology"
    "|chips=chips|run=run_id|run id=run_id|cost=cost|badput=largest_badput"
)
_COLUMN_ALIASES: dict[str, str] = {
    **{
        norm(h): key
        for lab in (_ZH, _EN)
        for h, key in zip(_split(lab.runs_header), _split(_COLUMNS), strict=True)
    },
    **dict(pair.split("=") for pair in _split(_EXTRA_ALIASES)),
}


def marker(run_id: str) -> str:
    """The invisible comment that identifies a run's row and section in a README."""
    return f"<!-- tpu-trainer run {run_id} -->"


def render_readme(run: RunReport, *, lang: Lang = "zh", plot_links: Sequence[str] = ()) -> str:
    """A new README holding just ``run``."""
    lab = LABELS[lang]
    rows = _split(lab.overview_rows)
    framework = f"{run.framework} ({run.framework_version})".removesuffix(" ()")
    values = (run.model, run.params, run.hardware, framework, *(v for _, v in _versions(run)[1:]))
    overview = [(name, value or "—") for name, value in zip(rows[2:], values, strict=True)]
    return (
        f"# {lab.title.format(model=_inline(run.model))}\n\n"
        f"## {lab.overview}\n\n{_table(rows[:2], overview)}\n"
        f"## {lab.results}\n\n### {lab.my_runs}\n\n"
        f"{runs_table(run, lab)}\n"
        f"{run_section(run, lab, plot_links)}"
    )


# -- rendering ------------------------------------------------------------------------------


def _inline(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|")


def table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    delimiter = "|" + "|".join("-" * max(3, _width(h) + 2) for h in header) + "|\n"
    return table_row(header) + delimiter + "".join(table_row(r) for r in rows)


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospaced editor (CJK characters take two)."""
    return sum(2 if east_asian_width(c) in "WF" else 1 for c in text)


def runs_table(run: RunReport, lab: Labels) -> str:
    header = _split(lab.runs_header)
    return _table(header, [run_cells(run, header, lab)])


def _num(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def _marks(run: RunReport, lab: Labels) -> str:
    """What the run was, when it is not a successful measurement ("FAILED · REHEARSAL ...")."""
    marks = _MARKS[lab.code]
    found = [marks[run.outcome]] if run.outcome is not Outcome.SUCCEEDED else []
    return " · ".join([*found, *([marks[_REHEARSAL]] if run.rehearsal else [])])


def run_cells(run: RunReport, header: Sequence[str], lab: Labels) -> list[str]:
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
        "goodput": _percent(run.goodput),
        "largest_badput": run.largest_badput or "n/a",
        "cost": _cell(_cost(run)),
        "note": _cell(note),
        "topology": _cell(run.topology),
        "chips": str(run.chips),
        "run_id": run.run_id,
    }
    keys = [_COLUMN_ALIASES.get(norm(h), "") for h in header]
    if "note" in keys and "goodput" not in keys:
        values["note"] = _cell("; ".join(n for n in (note, _ledger_note(run)) if n))
    cells = [values.get(key, "") for key in keys] or [""]
    if marks and "note" not in keys:
        cells[-1] = f"**{marks}** {cells[-1]}".rstrip()
    cells[-1] = f"{cells[-1]} {marker(run.run_id)}".lstrip()
    return cells


def _percent(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.1%}"


def _cost(run: RunReport) -> str:
    """``$12.34 ($0.5600/M tokens)``, or why there is no cost."""
    if run.cost_usd is None:
        return run.price_note.removesuffix(" in the configuration") or "n/a"
    per = run.cost_per_million_tokens
    return f"${run.cost_usd:,.2f}" + ("" if per is None else f" (${per:.4f}/M tokens)")


def _ledger_note(run: RunReport) -> str:
    """Goodput and cost for a README whose table has no columns for them."""
    if run.goodput is None and run.cost_usd is None and not run.price_note:
        return ""
    badput = f" (largest badput {run.largest_badput})" if run.largest_badput else ""
    return f"goodput {_percent(run.goodput)}{badput}, cost {_cost(run)}"


def _steps_label(run: RunReport, lab: Labels) -> str:
    chosen = run.steady_steps
    if not all(map(lt, chosen, islice(chosen, 1, None))):
        chosen = tuple(sorted(set(chosen)))
    if not chosen:
        return ""
    last = max((s.step for s in run.steps), default=chosen[-1])
    if chosen[-1] - chosen[0] + 1 == len(chosen):
        if chosen[-1] >= last:
            return f"{chosen[0]}+"
        return f"{chosen[0]}–{chosen[-1]}"
    if run.step_buckets:  # a long run: ranges and a count, not every step
        return lab.steady_ranges.format(ranges=ranges(chosen, "–"), count=len(chosen))
    return ", ".join(str(s) for s in chosen)


def run_section(run: RunReport, lab: Labels, plot_links: Sequence[str]) -> str:
    heading = lab.log_heading.format(topology=_inline(run.topology), date=run.date)
    marks = _marks(run, lab)
    heading += f" — {marks}" if marks else ""
    rows = [_step_cells(s) for s in run.steps]
    steps = _steps_label(run, lab)
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
        _steps_part(run, lab, rows),
        "\n",
        f"- **{steady}**: ~{_num(run.steady_step_seconds, 2)} s/step, "
        f"~{_num(run.steady_tflops_chip, 1)} TFLOP/s/chip, "
        f"~{_num(run.steady_tokens_chip, 1)} Tokens/s/chip\n",
        f"- **{lab.loss_drop}**: {_num(run.loss_first, 3)} → {_num(run.loss_last, 3)} "
        f"({'n/a' if drop is None else _num(drop, 1) + '%'})\n",
        f"- **{lab.run}**: {' · '.join(facts)}\n",
        ledger_line(run, lab),
        *(f"\n![{_alt(link)}]({link})\n" for link in plot_links),
    ]
    return "".join(parts)


def ledger_line(run: RunReport, lab: Labels) -> str:
    """The section's goodput and cost line ("" when the run has neither)."""
    if not _ledger_note(run):
        return ""
    return lab.goodput.format(
        goodput=_percent(run.goodput), badput=run.largest_badput or "n/a", cost=_cost(run)
    )


def _steps_part(run: RunReport, lab: Labels, rows: Sequence[tuple[str, ...]]) -> str:
    """Every step of a short run; a long run's first steps, per-N-steps rows, last steps."""
    header = _split(lab.steps_header)
    if not run.step_buckets:
        return _table(header, rows) if rows else f"{lab.no_steps}\n"
    buckets = run.step_buckets
    head, tail = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    width = buckets[0].width
    lines = [
        lab.summarised.format(
            steps=f"{run.steps_logged:,}", first=len(head), last=len(tail), width=f"{width:,}"
        )
    ]
    if run.chart_buckets:
        lines.append(lab.charts.format(width=f"{run.chart_buckets[0].width:,}"))
    middle = [_bucket_cells(b) for b in buckets]
    return " ".join(lines) + "\n\n" + _table(header, [*head, *middle, *tail])


def _bucket_cells(b: StepBucket) -> tuple[str, ...]:
    def cell(stat: Stat | None, digits: int) -> str:
        if stat is None:
            return "n/a"
        low, high = _num(stat.low, digits), _num(stat.high, digits)
        return f"{_num(stat.mean, digits)} ({low}–{high})"

    return (
        f"{b.first}–{b.last}",
        cell(b.seconds, 2),
        cell(b.tflops_device, 1),
        cell(b.tflops_chip, 1),
        cell(b.tokens_chip, 1),
        cell(b.loss, 3),
    )


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
