"""Benchmark: the commands users run on long training runs (10 k to 500 k steps).

Generates MaxText logs of 20, 10 000, 100 000 and 500 000 steps (``bench/_long_log.py``: one
step line in three, ~150 bytes a line, a loss spike and a slow step at step 250 000), once,
into ``--dir`` (default: a folder under the system temp dir), then measures, each in its own
process so that its peak RSS is its own (``os.wait4``'s resource usage of that child):

* ``collect LOG --slice tpu7x-4x4x8`` (the table) and ``collect --json``, as subprocesses of the
  installed CLI: wall time, CPU time, MB/s of log, peak RSS;
* the follow loop's cost per line: every line of the log through the step display a run
  shows while it streams worker 0's log (``app.step_display.StepDisplay``);
* the collect and report stages a run ends with (``app.results.record_results``: the log into
  the store, the README section and its charts), in one process, on a plan of the test
  fixture recipe; and the same stages piece by piece: reading the log, the store insert, the
  README write, the charts;
* the README section's length and whether the loss chart's buckets keep the spike.

Prints a table per size (with the load average before and after it: the machine may be
shared, and CPU seconds are the figures that do not depend on it), the growth from 10 k to
500 k steps (cost per step at 500 k over cost per step at 10 k: 1.0 is linear), and the
targets. Exit 1 when a target is missed.

Usage: python bench/long_run.py [--sizes 20,10000,100000,500000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _long_log import SPIKE_LOSS, SPIKE_STEP, make_log
from _timing import cli_path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
RECIPE = FIXTURES / "recipes" / "training" / "ironwood" / "mixtral-moe" / "4k-fp8-tpu7x-4x4x4"
SIZES = (20, 10_000, 100_000, 500_000)
COLLECT_SECONDS, COLLECT_MB_S, COLLECT_RSS_MB = 5.0, 50.0, 200.0
STAGES_STEPS, STAGES_SECONDS, STAGES_RSS_MB = 100_000, 10.0, 300.0
README_LINES = 200
GROWTH_LIMIT = 1.2
MB = 1_000_000


def _run_child(argv: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and stdout of one child process."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        err = child.stderr.read().decode(errors="replace") if child.stderr else ""
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited with {child.returncode}:\n{err[-2000:]}")
        size = out.seek(0, os.SEEK_END)
        out.seek(max(0, size - 20000))  # only the tail: this process stays small, and a
        tail = out.read().decode(errors="replace")  # child's peak RSS starts from ours
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 * 1.048576, tail


def _child(part: str, log: Path) -> None:
    """One measurement inside this (child) process; prints its figures as JSON."""
    if part == "follow":
        from tpu_trainer.app.display import SilentDisplay
        from tpu_trainer.app.step_display import StepDisplay

        class Discard(SilentDisplay):
            def info(self, message: str) -> None:
                pass

        show = StepDisplay(Discard())
        start, cpu = time.perf_counter(), time.process_time()
        with log.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                show(line.rstrip("\n"))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(json.dumps({"seconds": wall, "cpu": cpu, "lines": show.lines}))
        return
    print(json.dumps(_stages(log, whole=part == "record")))


def _stages(log: Path, *, whole: bool) -> dict[str, Any]:
    from datetime import date, datetime

    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.app.results import (
        metrics_from_log,
        record_results,
        run_report,
        store_metrics,
    )
    from tpu_trainer.app.stages import Stages
    from tpu_trainer.launch_path import LaunchPath
    from tpu_trainer.plan.plan import PlanOptions
    from tpu_trainer.report.plots import write_plots
    from tpu_trainer.report.readme import update_readme
    from tpu_trainer.store.db import RunMode, RunStore

    work = Path(tempfile.mkdtemp(prefix="long-run-"))
    plan = plan_request(
        Request(str(RECIPE / "run_recipe.sh"), config_path=FIXTURES / "config.yaml"),
        PlanOptions(user="bench", now=datetime(2026, 11, 22, 6, 0), profiler=None),
    )
    store = RunStore(work / "runs.db", RunMode.REHEARSAL)
    store.create_run(
        "r0001",
        model=plan.model,
        request="bench",
        launcher=LaunchPath.XPK,
        device_type=plan.slice.device_type,
        precision=plan.precision.value,
        project=None,
        cluster=None,
        region=None,
        zone=None,
        plan_json=None,
    )
    times: dict[str, Any] = {}
    start = time.perf_counter()
    if whole:
        record_results(Stages(store, SilentDisplay(), "r0001"), plan, log, "en")
        times["record_results"] = time.perf_counter() - start
        readme = work / "runs" / "r0001" / "README.md"
        times["readme_lines"] = len(readme.read_text(encoding="utf-8").splitlines())
        return times
    metrics = metrics_from_log(log, plan)
    times["read_log"] = time.perf_counter() - start
    mark = time.perf_counter()
    store_metrics(store, "r0001", metrics)
    times["store_insert"] = time.perf_counter() - mark
    mark = time.perf_counter()
    report = run_report(metrics, plan, "r0001", date(2026, 11, 22))
    times["report_model"] = time.perf_counter() - mark
    assert report is not None
    mark = time.perf_counter()
    plots = write_plots(report, work)
    times["plots"] = time.perf_counter() - mark
    mark = time.perf_counter()
    update_readme(work / "README.md", report, lang="en", plots=plots, lock_dir=work / "locks")
    times["readme_write"] = time.perf_counter() - mark
    spike = [b for b in report.chart_buckets if b.first <= SPIKE_STEP <= b.last]
    times["spike_kept"] = (
        bool(spike) and spike[0].loss is not None and spike[0].loss.high == (SPIKE_LOSS)
    )
    times["stored_steps"] = store.step_count("r0001")
    return times


def _measure(log: Path, steps: int) -> dict[str, Any]:
    cli = str(cli_path())
    size = log.stat().st_size / MB
    row: dict[str, Any] = {"steps": steps, "mb": size, "load": [os.getloadavg()[0]]}
    for name, extra in (("table", []), ("json", ["--json"])):
        wall, cpu, rss, _ = _run_child([cli, "collect", str(log), "--slice", "tpu7x-4x4x8", *extra])
        row[name] = {"wall": wall, "cpu": cpu, "rss": rss, "mb_s": size / wall}
    me = [sys.executable, __file__]
    wall, cpu, rss, out = _run_child([*me, "--child", "follow", str(log)])
    follow = json.loads(out.strip().splitlines()[-1])
    lines = max(follow["lines"], 1)
    row["follow"] = {
        "us_per_line": follow["seconds"] / lines * 1e6,
        "cpu_us_per_line": follow["cpu"] / lines * 1e6,
        "rss": rss,
    }
    wall, cpu, rss, out = _run_child([*me, "--child", "record", str(log)])
    row["record"] = {"wall": wall, "cpu": cpu, "rss": rss, **json.loads(out.splitlines()[-1])}
    wall, cpu, rss, out = _run_child([*me, "--child", "parts", str(log)])
    row["parts"] = {"wall": wall, "cpu": cpu, "rss": rss, **json.loads(out.splitlines()[-1])}
    row["load"].append(os.getloadavg()[0])
    return row


def _print_row(r: dict[str, Any]) -> None:
    p, rec = r["parts"], r["record"]
    load = " → ".join(f"{a:.1f}" for a in r["load"])
    print(f"\n{r['steps']:,} steps, {r['mb']:.1f} MB of log (load average {load})")
    for name in ("table", "json"):
        c = r[name]
        print(
            f"  collect {name:<5}  {c['wall']:7.2f} s wall  {c['cpu']:7.2f} s CPU  "
            f"{c['mb_s']:7.1f} MB/s  peak RSS {c['rss']:6.1f} MB"
        )
    f = r["follow"]
    print(
        f"  follow loop      {f['us_per_line']:7.2f} µs/line wall, "
        f"{f['cpu_us_per_line']:.2f} µs/line CPU, peak RSS {f['rss']:.1f} MB"
    )
    print(
        f"  collect+report   {rec['record_results']:7.2f} s (record_results, in-process), "
        f"{rec['cpu']:.2f} s CPU, peak RSS {rec['rss']:.1f} MB, README {rec['readme_lines']} lines"
    )
    print(
        f"  pieces           read log {p['read_log']:.2f} s, store insert {p['store_insert']:.2f} s "
        f"({p['stored_steps']:,} rows), report {p['report_model']:.2f} s, "
        f"plots {p['plots']:.2f} s, README {p['readme_write']:.3f} s; {p['cpu']:.2f} s CPU in all"
        + (f"; spike kept in the chart: {p['spike_kept']}" if r["steps"] > SPIKE_STEP else "")
    )


def _verdicts(rows: dict[int, dict[str, Any]]) -> list[tuple[str, bool]]:
    found: list[tuple[str, bool]] = []
    biggest = rows[max(rows)]
    for name in ("table", "json"):
        c = biggest[name]
        found.append(
            (
                f"collect {name} on {biggest['steps']:,} steps: {c['wall']:.2f} s ≤ "
                f"{COLLECT_SECONDS} s, {c['mb_s']:.0f} ≥ {COLLECT_MB_S:.0f} MB/s, "
                f"{c['rss']:.0f} ≤ {COLLECT_RSS_MB:.0f} MB",
                c["wall"] <= COLLECT_SECONDS
                and c["mb_s"] >= COLLECT_MB_S
                and c["rss"] <= COLLECT_RSS_MB,
            )
        )
    if STAGES_STEPS in rows:
        rec = rows[STAGES_STEPS]["record"]
        found.append(
            (
                f"collect+report stages on {STAGES_STEPS:,} steps: {rec['record_results']:.2f} s ≤ "
                f"{STAGES_SECONDS} s, {rec['rss']:.0f} ≤ {STAGES_RSS_MB:.0f} MB",
                rec["record_results"] <= STAGES_SECONDS and rec["rss"] <= STAGES_RSS_MB,
            )
        )
        lines = rec["readme_lines"]
        found.append(
            (
                f"README of {STAGES_STEPS:,} steps: {lines} < {README_LINES} lines",
                lines < README_LINES,
            )
        )
    spiked = [r for steps, r in rows.items() if steps > SPIKE_STEP]
    for r in spiked:
        found.append(
            (f"chart of {r['steps']:,} steps keeps the spike", bool(r["parts"]["spike_kept"]))
        )
    if 10_000 in rows and len(rows) > 1 and max(rows) > 10_000:
        small, big = rows[10_000], rows[max(rows)]
        scale = big["steps"] / small["steps"]
        for name in ("table", "json"):
            growth = big[name]["cpu"] / small[name]["cpu"] / scale
            found.append(
                (
                    f"collect {name} CPU growth 10 k → {big['steps']:,}: {growth:.2f} ≤ {GROWTH_LIMIT}",
                    growth <= GROWTH_LIMIT,
                )
            )
        growth = big["record"]["cpu"] / small["record"]["cpu"] / scale
        found.append(
            (f"collect+report CPU growth: {growth:.2f} ≤ {GROWTH_LIMIT}", growth <= GROWTH_LIMIT)
        )
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "tpu-trainer-long-run"
    )
    parser.add_argument("--child", nargs=2, metavar=("PART", "LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], Path(args.child[1]))
        return 0
    args.dir.mkdir(parents=True, exist_ok=True)
    rows: dict[int, dict[str, Any]] = {}
    for steps in (int(s) for s in args.sizes.split(",")):
        rows[steps] = _measure(make_log(args.dir, steps), steps)
        _print_row(rows[steps])
    print("\ntargets:")
    verdicts = _verdicts(rows)
    for text, ok in verdicts:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
