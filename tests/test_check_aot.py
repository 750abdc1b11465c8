"""The AOT memory-fit check: compile targets, the command, reading its output, the cache, the
findings, and two real compiles with MaxText 0.2.5 (the tiny model fits on tpu7x-8, llama3-70b
does not)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from tpu_trainer.checks.aot import (
    ENTRY_MODULE,
    AotOutcome,
    AotResult,
    AotSetup,
    AotUnavailableError,
    aot_argv,
    aot_env,
    aot_findings,
    cache_key,
    check_aot,
    compile_topology_args,
    effective_config,
    parse_result,
    run_aot,
)
from tpu_trainer.checks.memory_estimate import GIB
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandResult, CommandRunner, SubprocessRunner
from tpu_trainer.plan.plan import Level
from tpu_trainer.plan.slices import Slice

FIXTURES = Path(__file__).parent / "fixtures" / "aot"
TINY = [
    "model_name=default",
    "base_emb_dim=256",
    "base_num_decoder_layers=2",
    "base_mlp_dim=512",
    "base_num_query_heads=4",
    "base_num_kv_heads=4",
    "head_dim=64",
    "per_device_batch_size=1",
    "max_target_length=128",
]


@dataclass
class FakeRunner:
    """Answers every command with one fixture's text and exit status; records the calls."""

    text: str = ""
    code: int = 0
    calls: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)

    def run(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        env = kwargs.get("env") or {}
        assert isinstance(env, Mapping)
        self.calls.append((list(argv), dict(env)))
        return CommandResult(tuple(argv), self.code, self.text, "", 12.5)


@dataclass
class CountingRunner:
    inner: CommandRunner = field(default_factory=SubprocessRunner)
    calls: int = 0

    def run(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        self.calls += 1
        return self.inner.run(argv, **kwargs)  # type: ignore[arg-type]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def request(args: list[str], device: str = "tpu7x-8", slices: int = 1) -> MaxTextRequest:
    return MaxTextRequest.from_args(args, Slice.parse(device), slices)


def fake_setup(tmp_path: Path) -> AotSetup:
    return AotSetup(
        python=tmp_path / "rt" / "bin" / "python",
        maxtext_dir=tmp_path / "rt" / "maxtext",
        version="0.2.5",
        cache=tmp_path / "aot",
    )


def parsed(name: str, code: int, req: MaxTextRequest | None = None) -> AotResult:
    return parse_result(fixture(name), code, 40.0, req or request(TINY), "0.2.5")


# ---- compile targets and the command ------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "slices", "expected"),
    [
        ("tpu7x-2x2x1", 1, ["compile_topology=tpu7x-8", "compile_topology_num_slices=1"]),
        ("tpu7x-4x4x8", 2, ["compile_topology=tpu7x-256", "compile_topology_num_slices=2"]),
        ("tpu7x-1x1x1", 1, ["compile_topology=tpu7x-2", "compile_topology_num_slices=1"]),
        ("v6e-4x4", 1, ["compile_topology=v6e-16", "compile_topology_num_slices=1"]),
        ("v5litepod-2x4", 1, ["compile_topology=v5e-8", "compile_topology_num_slices=1"]),
        ("v5p-4x4x4", 1, ["compile_topology=v5p-128", "compile_topology_num_slices=1"]),
        ("v4-2x2x2", 1, ["compile_topology=v4-16", "compile_topology_num_slices=1"]),
        (
            "tpu7x-4x4x16",
            2,
            [
                "compile_topology=tpu7x:4x4x16",
                "internal_compile=true",
                "internal_compile_num_devices=1024",
                "compile_topology_num_slices=2",
            ],
        ),
        (
            "v5p-4x4x16",
            1,
            [
                "compile_topology=v5:4x4x16",
                "internal_compile=true",
                "internal_compile_num_devices=256",
                "compile_topology_num_slices=1",
            ],
        ),
    ],
)
@pytest.mark.unit
def test_compile_topology_uses_maxtexts_name_else_the_topology_itself(
    device: str, slices: int, expected: list[str]
) -> None:
    assert compile_topology_args(Slice.parse(device), slices) == expected


@pytest.mark.unit
def test_compile_topology_for_the_cpu_is_refused() -> None:
    with pytest.raises(AotUnavailableError):
        compile_topology_args(Slice.parse("cpu-1"))


@pytest.mark.unit
def test_argv_runs_train_compile_with_the_recipe_args_and_local_keys_replaced(
    tmp_path: Path,
) -> None:
    setup = fake_setup(tmp_path)
    req = request(
        [
            "run_name=user-run",
            "base_output_directory=gs://bucket/out",
            "model_name=llama3-70b",
            "profiler=xplane",
            "per_device_batch_size=2",
            "ici_fsdp_parallelism=8",
        ]
    )
    work = tmp_path / "work"
    argv = aot_argv(setup, req, work)
    assert argv[:2] == [str(setup.python), "-c"]
    assert argv[3:6] == [
        str(work / "termination-log"),
        ENTRY_MODULE,
        str(setup.maxtext_dir / "configs" / "base.yml"),
    ]
    args = argv[6:]
    keys = [a.partition("=")[0] for a in args]
    assert len(keys) == len(set(keys)), "a key given twice"
    assert "run_name=user-run" not in args
    assert "profiler=xplane" not in args
    assert f"base_output_directory={work / 'output'}" in args
    assert f"jax_cache_dir={work / 'jax_cache'}" in args
    kept = [a for a in args if a.split("=")[0] in ("model_name", "per_device_batch_size")]
    assert kept == ["model_name=llama3-70b", "per_device_batch_size=2"]
    assert "ici_fsdp_parallelism=8" in args
    assert args[-2:] == ["compile_topology=tpu7x-8", "compile_topology_num_slices=1"]


@pytest.mark.unit
def test_env_keeps_libtpu_private_and_passes_the_recipes_xla_flags(tmp_path: Path) -> None:
    req = replace(request(TINY), xla_flags=("--xla_tpu_a=true", "--xla_tpu_b=2"))
    env = aot_env(req, tmp_path)
    assert env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["TMPDIR"] == str(tmp_path / "tmp")
    assert env["LIBTPU_INIT_ARGS"] == "--xla_tpu_a=true --xla_tpu_b=2"
    assert "LIBTPU_INIT_ARGS" not in aot_env(request(TINY), tmp_path)


@pytest.mark.unit
def test_launcher_sends_the_termination_log_to_the_work_folder(tmp_path: Path) -> None:
    token = f"CONFIG ERROR {uuid.uuid4()}"
    (tmp_path / "fake_compile.py").write_text(
        "import sys\n"
        "print('args', sys.argv[1:])\n"
        "with open('/dev/termination-log', 'w') as f:\n"
        f"    f.write({token!r})\n",
        encoding="utf-8",
    )
    setup = replace(fake_setup(tmp_path), python=Path(sys.executable))
    argv = aot_argv(setup, request(["model_name=default"]), tmp_path)
    argv[4] = "fake_compile"
    done = SubprocessRunner().run(argv, env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert done.code == 0, done.stderr
    assert (tmp_path / "termination-log").read_text() == token
    assert "'model_name=default'" in done.stdout
    system_log = Path("/dev/termination-log")
    assert not system_log.is_file() or token not in system_log.read_text(errors="replace")


# ---- reading the output -------------------------------------------------------------------


@pytest.mark.unit
def test_parse_fitting_compile_adds_argument_output_minus_alias_plus_temp() -> None:
    result = parsed("fits.log", 0)
    assert result.outcome is AotOutcome.FITS
    assert result.memory is not None
    assert result.memory.per_device == 30000000 + 30001000 - 29999000 + 41000000
    assert result.bytes_per_device == result.memory.per_device
    assert result.compile_topology == "tpu7x-8"


@pytest.mark.unit
def test_parse_out_of_memory_reads_required_and_available() -> None:
    result = parsed("oom.log", 1)
    assert result.outcome is AotOutcome.OUT_OF_MEMORY
    assert result.required_bytes == pytest.approx(120.50 * GIB)
    assert result.available_bytes == pytest.approx(94.74 * GIB)
    assert result.memory is None


@pytest.mark.parametrize(
    ("name", "outcome", "words"),
    [
        ("indivisible.log", AotOutcome.SHARDING_ERROR, "partitioned 512 times"),
        ("badmesh.log", AotOutcome.MESH_ERROR, "logical_axis_index 8 of size 4"),
        ("config_error.log", AotOutcome.CONFIG_ERROR, "per_device_batch"),
        ("crash.log", AotOutcome.OTHER, "RuntimeError: libtpu compiler crashed"),
    ],
)
@pytest.mark.unit
def test_parse_errors(name: str, outcome: AotOutcome, words: str) -> None:
    result = parsed(name, 1)
    assert result.outcome is outcome
    assert words in result.message


@pytest.mark.unit
def test_parse_unknown_xla_flag_is_a_config_error_naming_the_flag() -> None:
    text = "ERROR: Unknown command line flag 'xla_tpu_not_a_flag'\n"
    result = parse_result(text, 1, 3.0, request(TINY), "0.2.5")
    assert result.outcome is AotOutcome.CONFIG_ERROR
    assert result.fix.startswith("remove --xla_tpu_not_a_flag from the recipe's XLA flags")


@pytest.mark.unit
def test_parse_success_without_memory_analysis_is_not_a_fit() -> None:
    assert (
        parse_result(
            "Finished train_compile.py successfully!", 0, 1.0, request(TINY), "0.2.5"
        ).outcome
        is AotOutcome.OTHER
    )


@pytest.mark.unit
def test_result_round_trips_through_json() -> None:
    for name, code in (("fits.log", 0), ("oom.log", 1)):
        result = parsed(name, code)
        assert AotResult.from_json(result.to_json()) == result


# ---- the cache ----------------------------------------------------------------------------


@pytest.mark.unit
def test_second_identical_check_answers_from_cache_without_the_runner(tmp_path: Path) -> None:
    setup = fake_setup(tmp_path)
    runner = FakeRunner(fixture("fits.log"))
    first = run_aot(request(TINY), runner, setup)
    second = run_aot(request([*TINY, "run_name=other", "steps=99"]), runner, setup)
    assert len(runner.calls) == 1
    assert not first.from_cache
    assert second.from_cache
    assert replace(second, from_cache=False) == first
    assert len(list(setup.cache.glob("*.json"))) == 1


@pytest.mark.unit
def test_cache_key_changes_with_args_topology_slices_flags_and_version() -> None:
    base = request(TINY)
    key = cache_key(base, "0.2.5")
    others = [
        cache_key(request([*TINY, "per_device_batch_size=2"]), "0.2.5"),
        cache_key(request(TINY, "tpu7x-16"), "0.2.5"),
        cache_key(request(TINY, slices=2), "0.2.5"),
        cache_key(replace(base, xla_flags=("--xla_tpu_x=1",)), "0.2.5"),
        cache_key(base, "0.2.6"),
    ]
    assert key not in others
    assert len(set(others)) == len(others)
    assert cache_key(request([*TINY, "base_output_directory=gs://b"]), "0.2.5") == key


@pytest.mark.unit
def test_changed_args_compile_again_and_crashes_are_not_cached(tmp_path: Path) -> None:
    setup = fake_setup(tmp_path)
    runner = FakeRunner(fixture("fits.log"))
    run_aot(request(TINY), runner, setup)
    run_aot(request(TINY, "tpu7x-16"), runner, setup)
    assert len(runner.calls) == 2
    crash = FakeRunner(fixture("crash.log"), code=1)
    run_aot(request([*TINY, "head_dim=32"]), crash, setup)
    run_aot(request([*TINY, "head_dim=32"]), crash, setup)
    assert len(crash.calls) == 2


@pytest.mark.unit
def test_run_passes_the_compile_environment_and_removes_its_work_folder(tmp_path: Path) -> None:
    setup = fake_setup(tmp_path)
    runner = FakeRunner(fixture("oom.log"), code=1)
    run_aot(request(TINY), runner, setup)
    argv, env = runner.calls[0]
    assert env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    work = Path(argv[3]).parent
    assert work.parent == setup.cache
    assert not work.exists()


# ---- findings -----------------------------------------------------------------------------


@pytest.mark.unit
def test_fit_is_a_pass_with_share_of_the_device() -> None:
    (finding,) = aot_findings(parsed("fits.log", 0), request(TINY))
    assert finding.name == "memory-fit (AOT)"
    assert finding.status is Level.PASS
    assert "0.07 GiB of 94.74 GiB per device (0.1 %)" in finding.message


@pytest.mark.unit
def test_out_of_memory_fails_with_the_need_and_ordered_fixes() -> None:
    req = request(
        [
            "model_name=llama3-70b",
            "per_device_batch_size=4",
            "max_target_length=2048",
            "remat_policy=minimal",
        ]
    )
    result = parsed("oom.log", 1, req)
    (finding,) = aot_findings(result, req, effective_config(req, None))
    assert finding.status is Level.FAIL
    assert "needs 120.50 GiB per device, 94.74 GiB available (1.27×" in finding.message
    fix = finding.fix
    order = [
        fix.index(s)
        for s in ("1) per_device_batch_size", "2) remat_policy=full", "offload", "tpu7x-")
    ]
    assert order == sorted(order)
    assert "optimizer_memory_host_offload=true" in fix
    assert "decoder_layer_input=offload" in fix


@pytest.mark.unit
def test_sharding_and_mesh_errors_become_their_own_findings() -> None:
    (sharding,) = aot_findings(parsed("indivisible.log", 1), request(TINY))
    (mesh,) = aot_findings(parsed("badmesh.log", 1), request(TINY))
    (config,) = aot_findings(parsed("config_error.log", 1), request(TINY))
    (crash,) = aot_findings(parsed("crash.log", 1), request(TINY))
    assert (sharding.name, sharding.status) == ("sharding (AOT)", Level.FAIL)
    assert "256" in sharding.fix
    assert (mesh.name, mesh.status) == ("mesh (AOT)", Level.FAIL)
    assert "per_device_batch_size" in config.fix
    assert (crash.name, crash.status) == ("memory-fit (AOT)", Level.WARN)


@pytest.mark.unit
def test_missing_runtime_is_reported_not_raised(tmp_path: Path) -> None:
    runner = FakeRunner()
    (finding,) = check_aot(request(TINY), runner, env={"TPU_TRAINER_CACHE": str(tmp_path)})
    assert finding.status is Level.WARN
    assert "runtime install maxtext" in finding.fix
    assert runner.calls == []


# ---- real compiles (MaxText 0.2.5 runtime) -------------------------------------------------


def real_setup(tmp_path: Path) -> AotSetup:
    try:
        installed = AotSetup.installed()
    except AotUnavailableError as e:
        pytest.fail(f"these tests compile with MaxText: {e.message}; {e.fix}")
    return replace(installed, cache=tmp_path / "aot")


@pytest.mark.runtime
def test_real_tiny_model_fits_on_tpu7x_8_then_answers_from_cache(tmp_path: Path) -> None:
    setup = real_setup(tmp_path)
    runner = CountingRunner()
    req = request(TINY)
    result = run_aot(req, runner, setup, timeout=900)
    assert result.outcome is AotOutcome.FITS, result.message
    assert result.memory is not None
    assert 10 * 2**20 < result.memory.per_device < GIB
    (finding,) = check_aot(req, runner, setup=setup)
    assert runner.calls == 1
    assert finding.status is Level.PASS
    assert "of 94.74 GiB per device" in finding.message
    assert "cached" in finding.message


@pytest.mark.runtime
def test_real_llama3_70b_runs_out_of_memory_on_tpu7x_8(tmp_path: Path) -> None:
    setup = real_setup(tmp_path)
    runner = CountingRunner()
    req = request(["model_name=llama3-70b", "per_device_batch_size=1", "max_target_length=2048"])
    (finding,) = check_aot(req, runner, setup=setup, timeout=900)
    assert runner.calls == 1
    assert finding.status is Level.FAIL
    assert "GiB per device, 94.74 GiB available" in finding.message
    result = run_aot(req, runner, setup)
    assert runner.calls == 1
    assert result.from_cache
    assert result.required_bytes is not None
    assert 130 * GIB < result.required_bytes < 170 * GIB
    assert "optimizer_memory_host_offload=true" in finding.fix
    assert "per_device_batch_size=" not in finding.fix
    assert "tpu7x-2x2x2" in finding.fix or "tpu7x-2x2x4" in finding.fix
