"""Bad input and odd environments give a clear message, and the screen tells the truth."""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env
from test_cli import cli
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import current_user
from tpu_trainer.app.results import write_report
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.config.model import EMPTY, Reservation
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.fakecloud.rehearsal import rehearsal_config, reservation_notice
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.report.model import RunReport

# -- --lang is one of the README's languages, everywhere -----------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("report", "r0001"),
        ("train", str(RECIPES_ROOT / RECIPES["classic"])),
        ("resume", "r0001"),
    ],
)
@pytest.mark.e2e
def test_an_unknown_lang_is_refused_naming_the_languages(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    proc = cli(*args, "--lang", "fr", env=cli_env(tmp_path))
    assert proc.returncode == 2
    assert "'fr' is not one of 'zh', 'en'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.unit
def test_write_report_refuses_an_unknown_language(tmp_path: Path) -> None:
    report = RunReport(
        run_id="r1",
        date="2026-11-22",
        model="m",
        config_name="c",
        topology="2x2x1",
        device_type="tpu7x-8",
        precision="bf16",
        chips=4,
        steady_step_seconds=1.0,
        steady_tflops_device=1.0,
        steady_tflops_chip=2.0,
        steady_tokens_chip=2.0,
        steady_steps=(2,),
        loss_first=2.0,
        loss_last=1.0,
        final_loss=1.0,
    )
    with pytest.raises(InputError, match="unknown README language 'fr'") as caught:
        write_report(report, tmp_path, "fr")
    assert "zh, en" in caught.value.fix
    assert list(tmp_path.iterdir()) == []


# -- a user without a name ------------------------------------------------------------------


@pytest.mark.unit
def test_no_user_name_anywhere_falls_back_to_the_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert current_user({}) == f"uid{os.getuid()}"
    assert current_user({"LOGNAME": "ada"}) == "ada"
    assert current_user({"USER": "bob", "LOGNAME": "ada"}) == "bob"


# -- the live step display -------------------------------------------------------------------


def _step_line(n: int, seconds: float) -> str:
    return (
        f"completed step: {n}, seconds: {seconds:.3f}, TFLOP/s/device: 700.000, "
        f"Tokens/s/device: 7000.000, total_weights: 65536, loss: {10 - n * 0.1:.3f}"
    )


@pytest.mark.unit
def test_the_pace_comes_from_the_step_times_not_from_arrival() -> None:
    display = SilentDisplay()
    steps = StepDisplay(display)
    for n, seconds in enumerate((120.0, 2.0, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5)):
        steps(_step_line(n, seconds))  # all at once, as a finished log is read back
    assert display.messages[0] == "step 0: 120.00 s, loss 10.000"
    assert display.messages[1] == f"step 1: 2.00 s, loss 9.900, {2 / 122:.2f} steps/s"
    assert display.messages[-1] == "step 7: 2.50 s, loss 9.300, 0.40 steps/s"


# -- a rehearsal's reservations ---------------------------------------------------------------


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        "project: demo-project\nregion: us-central1\ncluster: {name: demo-cluster}\n"
        "reservations:\n"
        "  - {name: res-a, zone: us-central1-a, host_count: 8}\n"
        "  - {name: res-b, zone: us-central1-b, host_count: 8}\n"
        "  - {name: res-c, zone: us-central1-c, host_count: 8}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.unit
def test_a_rehearsal_keeps_the_configurations_reservation_order(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path))
    names = ("res-c", "gone", "res-a")
    user = replace(EMPTY, reservations=tuple(Reservation(n) for n in names))
    config = rehearsal_config(scenario, "s.yaml", user)
    assert [r.name for r in config.reservations] == ["res-c", "res-a", "res-b"]
    assert config.default_zone == "us-central1-c"
    notice = reservation_notice(config, user)
    assert "configuration's order" in notice
    assert "res-c, res-a, res-b" in notice and "not in the scenario: gone" in notice


@pytest.mark.unit
def test_a_rehearsal_says_when_it_uses_the_scenarios_reservations(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path))
    user = replace(EMPTY, reservations=(Reservation("prod-1"),))
    config = rehearsal_config(scenario, "s.yaml", user)
    assert [r.name for r in config.reservations] == ["res-a", "res-b", "res-c"]
    notice = reservation_notice(config, user)
    assert "none of the configuration's reservations (prod-1)" in notice
    assert "res-a, res-b, res-c" in notice
    plain = reservation_notice(rehearsal_config(scenario, "s.yaml", None), None)
    assert plain == "rehearsal: reservations from the scenario, in its order: res-a, res-b, res-c"


@pytest.mark.unit
def test_a_rehearsal_keeps_the_configurations_hang_watchdog(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path))
    user = replace(EMPTY, watchdog_k=12.0, first_step_deadline=900.0)
    config = rehearsal_config(scenario, "s.yaml", user)
    assert (config.watchdog_k, config.first_step_deadline) == (12.0, 900.0)


# -- kubectl printing something that is not JSON --------------------------------------------


class _Prints:
    def __init__(self, stdout: str) -> None:
        self.stdout = stdout

    def run(self, argv: Sequence[str], **_: object) -> CommandResult:
        return CommandResult(tuple(argv), 0, self.stdout, "", 0.1)


@pytest.mark.parametrize("stdout", ["Unable to connect to the server", "[1, 2]", ""])
@pytest.mark.unit
def test_kubectl_output_that_is_not_json_is_a_clear_error(stdout: str) -> None:
    kubectl = Kubectl(_Prints(stdout))
    with pytest.raises(TpuTrainerError, match="kubectl get nodes -o json") as caught:
        kubectl.list_objects("nodes")
    assert caught.value.fix
    with pytest.raises(TpuTrainerError, match="kubectl get configmap x -o json"):
        kubectl.get("configmap", "x")


@pytest.mark.unit
def test_kubectl_items_that_are_not_objects_are_a_clear_error() -> None:
    kubectl = Kubectl(_Prints('{"items": "none"}'))
    with pytest.raises(TpuTrainerError, match="items are not a list of objects"):
        kubectl.list_objects("pods")
