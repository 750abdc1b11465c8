"""A run's timeline, chip-hours and cost, computed from store rows; the price table and the
configuration's price overrides; the Gantt chart's bars."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import store_with_run
from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import DataFileError
from tpu_trainer.catalog.prices import PRICES, load_prices
from tpu_trainer.config.model import config_from_mapping
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.errors import ConfigError
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.metrics.cost import chip_rate, run_cost
from tpu_trainer.metrics.goodput import Bucket
from tpu_trainer.metrics.ledger import phase_bars, run_ledger, tokens_trained
from tpu_trainer.metrics.timeline import (
    PhaseName,
    ResourceSpan,
    RunClock,
    StageSpan,
    timeline,
)
from tpu_trainer.report.timeline_plot import timeline_figure, write_timeline_plot
from tpu_trainer.store.db import RunMode

pytestmark = pytest.mark.unit

T0 = 1_000_000.0


def _gke_clock(chips: int = 64) -> RunClock:
    """A GKE run: capacity found at +60 s, pools ready at +360, follow +400..+1400 with three
    100 s steps, collect/report until +1450, pool deleted at +1600."""
    return RunClock(
        created_at=T0,
        finished_at=T0 + 1500,
        stages=[
            StageSpan("prerequisites", "ok", T0 + 5, T0 + 10),
            StageSpan("provision", "ok", T0 + 10, T0 + 360),
            StageSpan("configure", "ok", T0 + 360, T0 + 370),
            StageSpan("submit", "ok", T0 + 380, T0 + 400),
            StageSpan("follow", "succeeded", T0 + 400, T0 + 1400),
            StageSpan("collect", "ok", T0 + 1400, T0 + 1420),
            StageSpan("report", "ok", T0 + 1420, T0 + 1450),
        ],
        resources=[
            ResourceSpan("nodepool", "absent", T0 + 20, T0 + 30),  # exhausted reservation
            ResourceSpan("nodepool", "deleted", T0 + 60, T0 + 1600),
            ResourceSpan("workload", "deleted", T0 + 380, T0 + 1470),
        ],
        step_seconds=[400.0, 100.0, 100.0],
        chips=chips,
    )


def test_a_gke_run_has_every_phase_in_order_with_its_boundaries() -> None:
    line = timeline(_gke_clock())
    spans = {p.name: (p.start - T0, p.end - T0) for p in line.phases}
    assert spans == {
        PhaseName.CAPACITY: (0, 60),
        PhaseName.PROVISIONING: (60, 360),
        PhaseName.SETUP: (360, 400),
        PhaseName.STARTUP: (400, 800),
        PhaseName.COMPILE: (800, 1200),
        PhaseName.TRAINING: (1200, 1400),
        PhaseName.WIND_DOWN: (1400, 1450),
        PhaseName.TEARDOWN: (1450, 1600),
    }
    assert line.wall_seconds == 1600
    assert line.notes == ()


def test_chips_are_held_from_ready_to_the_last_delete() -> None:
    line = timeline(_gke_clock(chips=64))
    assert line.held == (T0 + 360, T0 + 1600)
    by_name = {p.name: p for p in line.phases}
    assert by_name[PhaseName.CAPACITY].chip_hours == 0
    assert by_name[PhaseName.PROVISIONING].chip_hours == 0
    assert by_name[PhaseName.TRAINING].chip_hours == pytest.approx(64 * 200 / 3600)
    assert line.chip_hours == pytest.approx(64 * 1240 / 3600)


def test_goodput_is_training_time_over_wall_time_and_names_the_largest_badput() -> None:
    line = timeline(_gke_clock())
    assert line.goodput == pytest.approx(200 / 1600)
    bad = line.largest_badput
    assert bad is not None
    assert (bad.name, bad.seconds) == (PhaseName.STARTUP, 400)


def test_a_local_run_has_no_capacity_or_provisioning_and_no_chips() -> None:
    clock = RunClock(
        created_at=T0,
        finished_at=T0 + 100,
        stages=[
            StageSpan("runtime", "ok", T0 + 1, T0 + 10),
            StageSpan("train", "ok", T0 + 10, T0 + 90),
            StageSpan("collect", "ok", T0 + 90, T0 + 95),
        ],
        step_seconds=[30.0, 5.0, 5.0],
        chips=0,
    )
    line = timeline(clock)
    assert [p.name for p in line.phases] == [
        PhaseName.SETUP,
        PhaseName.STARTUP,
        PhaseName.COMPILE,
        PhaseName.TRAINING,
        PhaseName.WIND_DOWN,
        PhaseName.TEARDOWN,
    ]
    assert line.chip_hours == 0
    assert line.held is None


def test_step_times_longer_than_the_training_stage_are_scaled_into_it_with_a_note() -> None:
    clock = RunClock(
        created_at=T0,
        finished_at=T0 + 30,
        stages=[StageSpan("train", "ok", T0 + 10, T0 + 20)],
        step_seconds=[60.0, 20.0, 20.0],
    )
    line = timeline(clock)
    compile_phase = line.phase(PhaseName.COMPILE)
    training = line.phase(PhaseName.TRAINING)
    assert compile_phase is not None
    assert training is not None
    assert compile_phase.start == pytest.approx(T0 + 10)
    assert compile_phase.seconds == pytest.approx(6.0)
    assert training.seconds == pytest.approx(4.0)
    assert "scaled" in line.notes[0]


def test_a_run_that_never_trained_has_no_compile_or_training_phase() -> None:
    clock = RunClock(
        created_at=T0,
        finished_at=T0 + 50,
        stages=[
            StageSpan("provision", "failed", T0 + 1, T0 + 40),
        ],
        resources=[ResourceSpan("nodepool", "absent", T0 + 2, T0 + 40)],
        chips=16,
    )
    line = timeline(clock)
    assert [p.name for p in line.phases] == [PhaseName.WIND_DOWN, PhaseName.TEARDOWN]
    assert line.chip_hours == 0
    assert line.goodput == 0


def test_the_shipped_table_prices_known_families_and_cites_its_source() -> None:
    rate = chip_rate(Family.V6E, "us-central1")
    assert rate.usd_per_chip_hour == PRICES[Family.V6E].regions["us-central1"].on_demand
    assert chip_rate(Family.V6E, "europe-west4").usd_per_chip_hour == 2.97
    assert "skypilot-catalog" in rate.source and rate.usd_per_chip_hour == 2.70
    elsewhere = chip_rate(Family.V5P, "antarctica-south1")
    assert "no entry for antarctica-south1" in elsewhere.source


def test_tpu7x_has_no_shipped_price_and_says_how_to_set_one() -> None:
    assert Family.V7 not in PRICES
    rate = chip_rate(Family.V7, "us-central1")
    assert rate.usd_per_chip_hour is None
    assert rate.source == "price unknown — set prices.tpu7x in the configuration"
    line = timeline(_gke_clock())
    cost = run_cost(line, rate, tokens=1e6)
    assert cost.total is None
    assert cost.per_million_tokens is None


def test_configured_prices_override_the_table_by_family_alias() -> None:
    overrides = {"tpu7x": ChipPrice(on_demand=4.2), "trillium": ChipPrice(spot=1.0)}
    assert chip_rate(Family.V7, None, overrides).usd_per_chip_hour == 4.2
    v6e = chip_rate(Family.V6E, "us-central1", overrides)
    assert v6e.spot_usd_per_chip_hour == 1.0
    assert v6e.usd_per_chip_hour == PRICES[Family.V6E].regions["us-central1"].on_demand


def test_cost_per_phase_and_per_million_tokens() -> None:
    line = timeline(_gke_clock(chips=64))
    cost = run_cost(line, chip_rate(Family.V7, None, {"tpu7x": ChipPrice(on_demand=2.0)}), 5e6)
    assert cost.total == pytest.approx(64 * 1240 / 3600 * 2.0)
    assert sum(c or 0 for c in cost.phases) == pytest.approx(cost.total)
    assert cost.total is not None
    assert cost.per_million_tokens == pytest.approx(cost.total / 5)


def test_tokens_come_from_total_weights_else_from_the_rate() -> None:
    steps: list[dict[str, Any]] = [
        {"seconds": 2.0, "total_weights": 1000.0, "tokens_device": 9.0},
        {"seconds": 2.0, "total_weights": None, "tokens_device": 100.0},
    ]
    assert tokens_trained(steps, jax_devices=4) == 1000.0 + 100.0 * 4 * 2.0
    assert tokens_trained([{"seconds": 1.0}], jax_devices=4) is None


def test_the_configuration_parses_prices_and_refuses_bad_ones() -> None:
    config = config_from_mapping(
        {"prices": {"tpu7x": "4.20", "v6e": {"spot": "1.0"}}}, "c.yaml", require=False
    )
    assert config.prices == {"tpu7x": ChipPrice(4.2, None), "v6e": ChipPrice(None, 1.0)}
    for bad, said in (
        ({"tpu7x": "cheap"}, "'cheap' is not a number"),
        ({"tpu7x": "-1"}, "is not a price"),
        ({"v6e": {"reserved": "1"}}, "unknown field(s) reserved"),
        ("4.2", "expected a mapping"),
    ):
        with pytest.raises(ConfigError) as err:
            config_from_mapping({"prices": bad}, "c.yaml", {"prices": 7}, require=False)
        assert err.value.message.startswith("c.yaml:7: prices: ")
        assert said in err.value.message
        assert "prices: {tpu7x: 4.20" in err.value.fix


def test_a_malformed_price_table_names_the_family_and_key() -> None:
    good = (
        "prices:\n  v6e:\n    default_region: r1\n    regions: {r1: {on_demand: 1.0, spot: null}}\n"
    )
    good += "    source: https://example.com/p\n    date: '2025-01-01'\n"
    assert load_prices(good)[Family.V6E].regions["r1"].on_demand == 1.0
    for old, new, named in (
        ("on_demand: 1.0", "on_demand: -1", "prices.v6e.regions.r1"),
        ("default_region: r1", "default_region: r2", "default_region r2"),
        ("https://example.com/p", "example.com", "source must be an https://"),
        ("  v6e:", "  v9:", "prices.v9: not a TPU family"),
    ):
        with pytest.raises(DataFileError, match=named.replace(".", r"\.")):
            load_prices(good.replace(old, new))


def test_the_gantt_chart_draws_one_bar_per_phase_where_and_as_long_as_it_was(
    tmp_path: Path,
) -> None:
    line = timeline(_gke_clock())
    bars = phase_bars(line)
    fig = timeline_figure(bars, "run")
    patches = fig.axes[0].patches
    assert len(patches) == len(line.phases)
    drawn = [(p.get_x(), p.get_width()) for p in patches]  # type: ignore[attr-defined]
    assert drawn == [(p.start - T0, p.seconds) for p in line.phases]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [p.name.value for p in line.phases]
    written = write_timeline_plot(bars, "run", tmp_path / "runs" / "r1")
    assert written is not None
    assert written.read_bytes().startswith(b"\x89PNG")
    assert write_timeline_plot([], "run", tmp_path) is None


def test_prices_come_from_the_shipped_table_and_the_configuration_never_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every socket refused, each family is priced (or said to be unpriced) and a run is
    costed: no pricing API is asked."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a price was looked up over the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for family in Family:
        rate = chip_rate(family, "us-central1", {"tpu7x": ChipPrice(on_demand=3.0)})
        assert rate.source
        if family in PRICES or family is Family.V7:
            assert rate.usd_per_chip_hour is not None, family
    cost = run_cost(timeline(_gke_clock()), chip_rate(Family.V5P, "us-central1"), tokens=2e6)
    assert cost.total is not None and cost.total > 0


@pytest.mark.parametrize(
    ("launcher", "waited", "not_waited"),
    [
        (LaunchPath.XPK, Bucket.SCHEDULING_AND_IMAGE_PULL, Bucket.ENVIRONMENT_SETUP),
        (LaunchPath.KUBERAY, Bucket.SCHEDULING_AND_IMAGE_PULL, Bucket.ENVIRONMENT_SETUP),
        (LaunchPath.TPU_VM, Bucket.ENVIRONMENT_SETUP, Bucket.SCHEDULING_AND_IMAGE_PULL),
        (LaunchPath.LOCAL, Bucket.ENVIRONMENT_SETUP, Bucket.SCHEDULING_AND_IMAGE_PULL),
    ],
)
def test_the_wait_before_the_program_is_named_by_what_the_launch_path_waits_for(
    tmp_path: Path, launcher: LaunchPath, waited: Bucket, not_waited: Bucket
) -> None:
    store = store_with_run(tmp_path, RunMode.REHEARSAL, launcher, "v6e-8")
    store.stage_started("r1", "train")
    time.sleep(0.02)  # a run whose program never printed a step: all of it is the wait
    store.stage_finished("r1", "train", "failed")
    row = store.run("r1")
    assert row is not None
    good = run_ledger(store, row, {}).good
    assert good.badput[waited] > 0
    assert good.badput[not_waited] == 0
