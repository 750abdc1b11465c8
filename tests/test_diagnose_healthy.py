"""``diagnose`` on logs of healthy runs (Ray, Tunix, Transformers; MaxText's is in
test_diagnose_families.py): lines that read like errors but belong to a run that succeeded match
neither a signature nor the family classifier. JAX's backend probe, logged at INFO whenever JAX
starts without libtpu, is told apart from the same message raised because the TPU was asked for."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.diagnose_classify import reads_as_error

pytestmark = pytest.mark.unit

HEALTHY = FIXTURES / "diagnose" / "healthy"
PROBE = "Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so"


@pytest.mark.parametrize(
    ("name", "holds"),
    [
        ("ray_maxtext_job.log", "core_worker.cc:2465: Actor with class name: 'PreemptionWatcher'"),
        ("tunix_sft_cpu.log", f"INFO:jax._src.xla_bridge:{PROBE}"),
        ("hf_trainer_cpu.log", "***** Running training *****"),
    ],
)
def test_unit_a_healthy_run_log_matches_nothing(name: str, holds: str) -> None:
    text = (HEALTHY / name).read_text(encoding="utf-8")
    assert holds in text  # the line that reads like an error is really there
    assert diagnose(text.splitlines()) == []


@pytest.mark.parametrize(
    "line",
    [
        # JAX probing its backends (JAX_PLATFORMS unset) logs each failure at INFO, then runs
        # on what it found: a GPU or CPU run prints these and is healthy.
        f"I1204 13:13:42.886529 139807170155648 xla_bridge.py:895] {PROBE}: libtpu.so: "
        "cannot open shared object file: No such file or directory",
        f"xla_bridge.py:841] {PROBE}: libtpu.so: cannot open shared object file: No such file "
        "or directory",
        f"2024-08-16 14:32:29,853 {PROBE}: libtpu.so: cannot open shared object file: No such "
        "file or directory",
        "2023-02-01 17:25:55,710 Unable to initialize backend 'tpu': module "
        "'jaxlib.xla_extension' has no attribute 'get_tpu_client'",
    ],
)
def test_unit_jax_backend_probe_logged_at_info_is_no_error(line: str) -> None:
    assert not reads_as_error(line)
    assert diagnose([line]) == []


@pytest.mark.parametrize(
    "line",
    [
        # raised: the TPU was asked for (JAX_PLATFORMS=tpu) and libtpu is not there
        f"RuntimeError: {PROBE}: libtpu.so: cannot open shared object file: No such file or "
        "directory",
        f"{PROBE}: libtpu.so: cannot open shared object file: No such file or directory (set "
        "JAX_PLATFORMS='' to automatically choose an available backend)",
        # a TPU host whose JAX has no libtpu says so at WARNING, then falls back to the CPU
        "WARNING:2024-06-25 00:34:55,143:jax._src.xla_bridge:940: A Google TPU may be present "
        "on this machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling "
        "back to cpu.",
        "OSError: libtpu.so: cannot open shared object file: No such file or directory",
    ],
)
def test_unit_libtpu_missing_when_the_tpu_was_asked_for(line: str) -> None:
    (match,) = diagnose([line])
    assert (match.signature, match.severity) == ("libtpu-missing", "fatal")


def test_unit_a_raised_backend_failure_is_still_the_tpu_backend() -> None:
    line = (
        "Unable to initialize backend 'tpu': UNIMPLEMENTED: LoadPjrtPlugin is not implemented "
        "on windows yet. (set JAX_PLATFORMS='' to automatically choose an available backend)"
    )
    assert [m.signature for m in diagnose([line])] == ["tpu-backend-init"]


def test_unit_another_frameworks_assertion_is_not_put_in_the_tpu_runtime() -> None:
    line = (
        "RuntimeError: 0 <= device.index() && device.index() < static_cast<c10::DeviceIndex>"
        "(device_ready_queues_.size()) INTERNAL ASSERT FAILED at "
        '"/pytorch/torch/csrc/autograd/engine.cpp":1523, please report a bug to PyTorch.'
    )
    assert reads_as_error(line)
    assert diagnose([line]) == []
