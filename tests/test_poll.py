"""The one polling loop: answers, pending rounds, the live line, timeouts, on a fake clock."""

from __future__ import annotations

import pytest

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.config.model import EMPTY
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import NodePool
from tpu_trainer.infra.poll import Expired, FakeClock, Pending, SystemClock, Tick, wait_until
from tpu_trainer.launchers.gke.node_pools import wait_running

pytestmark = pytest.mark.unit


def test_returns_the_first_answer_without_sleeping() -> None:
    clock = FakeClock()
    assert wait_until(lambda _t: "ready", interval=5, clock=clock) == "ready"
    assert clock.slept == []


def test_sleeps_the_interval_between_pending_rounds_and_shows_each() -> None:
    clock = FakeClock()
    answers: list[str | Pending] = [Pending("a PROVISIONING"), Pending("a PROVISIONING"), "done"]
    shown: list[tuple[str, float]] = []
    rounds: list[float] = []

    def check(tick: Tick) -> str | Pending:
        rounds.append(tick.elapsed)
        return answers.pop(0)

    found = wait_until(
        check, interval=10, clock=clock, on_tick=lambda label, s: shown.append((label, s))
    )
    assert found == "done"
    assert clock.slept == [10, 10]
    assert rounds == [0, 10, 20]
    assert shown == [("a PROVISIONING", 0), ("a PROVISIONING", 10)]


def test_expires_after_the_timeout_with_the_last_pending_answer() -> None:
    clock = FakeClock()
    states = iter(["PROVISIONING", "RECONCILING", "RECONCILING"])

    def check(_tick: Tick) -> str | Pending:
        state = next(states)
        return Pending(f"pool {state}", state)

    found = wait_until(check, interval=30, timeout=45, clock=clock)
    assert isinstance(found, Expired)
    assert found.last == Pending("pool RECONCILING", "RECONCILING")
    assert found.elapsed == 60
    assert clock.slept == [30, 30]


def test_the_timeout_is_judged_after_the_check_so_a_late_answer_still_counts() -> None:
    clock = FakeClock()

    def check(_tick: Tick) -> str | Pending:
        clock.advance(100)  # a slow call
        return "READY"

    assert wait_until(check, interval=1, timeout=10, clock=clock) == "READY"


def test_tick_now_reads_the_time_waited_after_a_slow_call() -> None:
    clock = FakeClock(at=1000)
    seen: list[tuple[float, float]] = []

    def check(tick: Tick) -> str:
        clock.advance(7)
        seen.append((tick.elapsed, tick.now()))
        return "ok"

    wait_until(check, interval=1, clock=clock)
    assert seen == [(0, 7)]


def test_started_counts_time_already_waited() -> None:
    clock = FakeClock(at=500)
    seen: list[float] = []

    def check(tick: Tick) -> str:
        seen.append(tick.elapsed)
        return "ok"

    wait_until(check, interval=1, clock=clock, started=380)
    assert seen == [120]


def test_check_errors_end_the_wait() -> None:
    clock = FakeClock()

    def check(_tick: Tick) -> str:
        raise RuntimeError("node pool went to ERROR")

    with pytest.raises(RuntimeError, match="went to ERROR"):
        wait_until(check, interval=1, clock=clock)


def test_the_system_clock_sleeps_through_the_sleeper_it_is_given() -> None:
    slept: list[float] = []
    clock = SystemClock(slept.append)
    before = clock.now()
    clock.sleep(3)
    assert slept == [3]
    assert clock.now() >= before


class _Pools:
    """A gcloud that answers the node pool's status from a script, one per describe."""

    def __init__(self, *statuses: str) -> None:
        self.statuses = list(statuses)

    def node_pool(self, _cluster: str, _region: str, name: str) -> NodePool:
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return NodePool(name, status, "tpu7x-standard-4t", 16, ("z",), None, None, {}, "1")


class _Lines(SilentDisplay):
    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []
        self.infos: list[str] = []

    def waiting(self, label: str, elapsed_s: float) -> None:
        self.waits.append((label, elapsed_s))

    def info(self, message: str) -> None:
        self.infos.append(message)


def _wait_running(gcloud: _Pools, display: _Lines, clock: FakeClock) -> NodePool:
    return wait_running(
        gcloud,  # type: ignore[arg-type]
        EMPTY,
        "np",
        display,
        run_id="0badf00d",
        poll_seconds=15,
        timeout_s=40,
        clock=clock,
    )


def test_a_node_pool_wait_on_the_fake_clock_sees_running_and_says_after_how_long() -> None:
    clock, display = FakeClock(), _Lines()
    pool = _wait_running(_Pools("PROVISIONING", "PROVISIONING", "RUNNING"), display, clock)
    assert pool.status == "RUNNING"
    assert clock.slept == [15, 15]
    assert display.waits == [("node pool np PROVISIONING", 0), ("node pool np PROVISIONING", 15)]
    assert display.infos == ["node pool np is RUNNING after 30 s"]


def test_a_node_pool_wait_times_out_with_the_state_it_was_still_in() -> None:
    clock, display = FakeClock(), _Lines()
    with pytest.raises(TpuTrainerError, match=r"node pool np still PROVISIONING after 45 s") as e:
        _wait_running(_Pools("PROVISIONING"), display, clock)
    assert "tpu-trainer cleanup 0badf00d" in e.value.fix
    assert clock.slept == [15, 15, 15]
