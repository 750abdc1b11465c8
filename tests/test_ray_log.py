"""Ray job logs: prefixes taken apart, worker 0 found from the controller's rank line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.frameworks.maxtext.log import read_log
from tpu_trainer.launchers.ray.log import (
    Worker0Lines,
    WorkerId,
    parse_ray_line,
    rank_zero,
    training_started,
    waiting_reason,
)

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RAY_V6E = FIXTURES / "maxtext_logs" / "ray_v6e_4x4.log"
RANK_LINE = (
    "\x1b[36m(TrainController pid=2210)\x1b[0m - (ip={ip}, pid={pid}) world_rank=0, "
    "local_rank=0, node_rank=0"
)


def test_a_worker_line_loses_colours_prefix_and_repeated_suffix() -> None:
    line = parse_ray_line(
        "\x1b[36m(RayTrainWorker pid=21663, ip=10.12.3.6)\x1b[0m completed step: 99, seconds: "
        "1.100, loss: 0.000 \x1b[32m[repeated 3x across cluster]\x1b[0m"
    )
    assert (line.actor, line.pid, line.ip, line.repeated) == (
        "RayTrainWorker",
        21663,
        "10.12.3.6",
        3,
    )
    assert line.text == "completed step: 99, seconds: 1.100, loss: 0.000"


def test_lines_of_the_driver_and_of_unnamed_processes_are_told_apart() -> None:
    driver = parse_ray_line("2026-11-22 08:04:58,161\tINFO worker.py:1691 -- Using address")
    assert driver.actor is None and driver.pid is None and not driver.from_process
    unnamed = parse_ray_line("\x1b[36m(pid=)\x1b[0m I1122 08:11:18.295309 2460 logger.cc:310] x")
    assert (unnamed.actor, unnamed.pid) == (None, None)
    assert unnamed.text.startswith("I1122 08:11:18")
    local = parse_ray_line("(RayTrainWorker pid=2583) devices [CpuDevice(id=0)]")
    assert (local.pid, local.ip, local.text) == (2583, None, "devices [CpuDevice(id=0)]")
    autoscaler = parse_ray_line("(autoscaler +1m2s) Tip: use `ray status`")
    assert autoscaler.actor is None and autoscaler.text.startswith("(autoscaler")


def test_the_rank_line_names_worker_0_only() -> None:
    assert rank_zero(parse_ray_line(RANK_LINE.format(ip="127.0.0.1", pid=2583))) == WorkerId(
        2583, "127.0.0.1"
    )
    other = RANK_LINE.format(ip="10.0.0.2", pid=7).replace("world_rank=0", "world_rank=1")
    assert rank_zero(parse_ray_line(other)) is None


def _ray_log_with_rank(pid: int, ip: str) -> list[str]:
    lines = RAY_V6E.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "Started training worker group" in line)
    return [*lines[: at + 1], RANK_LINE.format(ip=ip, pid=pid), *lines[at + 1 :]]


def test_worker_0_lines_are_the_named_workers_even_when_it_is_not_the_first_to_speak() -> None:
    kept = Worker0Lines()
    out = [text for raw in _ray_log_with_rank(3877, "10.12.5.9") for text in kept.feed(raw)]
    out += kept.finish()
    steps = [s.step for s in read_log(out).steps]
    assert steps == [0, 1, 2, 3, 7, 11]  # 3877's lines only, each step once
    assert not any("RayTrainWorker" in t or "\x1b" in t for t in out)


def test_without_a_rank_line_the_first_training_worker_counts_as_worker_0() -> None:
    kept = Worker0Lines()
    out = [text for raw in RAY_V6E.read_text().splitlines() for text in kept.feed(raw)]
    assert out == []  # waiting for the controller to name worker 0
    out = kept.finish()
    assert kept.worker0 == WorkerId(4411, "10.12.3.6")
    assert [s.step for s in read_log(out).steps] == list(range(12))


def test_a_print_copied_to_stdout_and_stderr_counts_once() -> None:
    kept = Worker0Lines()
    kept.feed(RANK_LINE.format(ip="127.0.0.1", pid=10))
    line = "(RayTrainWorker pid=10) completed step: 0, seconds: 0.2, loss: 4.0"
    twice = kept.feed(line) + kept.feed("(RayTrainWorker pid=10) devices [cpu]")
    twice += kept.feed(line) + kept.feed("(RayTrainWorker pid=10) devices [cpu]")
    twice += kept.feed("(RayTrainWorker pid=11) completed step: 1, seconds: 0.2, loss: 4.0")
    assert twice == ["completed step: 0, seconds: 0.2, loss: 4.0", "devices [cpu]"]


def test_started_and_waiting_lines() -> None:
    reserve = parse_ray_line(
        "\x1b[33m(JaxTrainer pid=812)\x1b[0m Failed to reserve TPU head for slice with shape: "
        "v6e-16, retrying in 10s \x1b[32m[repeated 5x across cluster]\x1b[0m"
    )
    assert waiting_reason(reserve) == (
        "Failed to reserve TPU head for slice with shape: v6e-16, retrying in 10s"
    )
    assert not training_started(reserve)
    assert training_started(
        parse_ray_line("(TrainController pid=1) Started training worker group of size 4: ")
    )
    assert training_started(parse_ray_line("(RayTrainWorker pid=5) hello"))
