"""Tunix GRPO: the configuration written whole, the memory profile, the program for a TPU VM,
the step lines read into step records, and the file loaded by Tunix 0.1.7's own parser (in the
cached Tunix runtime, Python 3.12)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.tunix.config import (
    GrpoSettings,
    MemoryProfile,
    Mesh,
    grpo_config,
    profile_changes,
    render_grpo_config,
    with_profile,
)
from tpu_trainer.frameworks.tunix.program import (
    TunixCase,
    check_with_tunix,
    parse_step,
    read_log,
    render_launcher,
    tunix_program,
)
from tpu_trainer.frameworks.vm_program import LogFormat
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.runtime.manager import TUNIX, install

ROLES = ("model_config", "actor_model_config", "reference_model_config", "rollout_model_config")
LOG = Path(__file__).resolve().parent / "fixtures" / "tpu_vm" / "tunix_grpo.log"


@pytest.mark.unit
def test_every_model_section_is_complete_and_written_out_without_yaml_aliases() -> None:
    text = render_grpo_config(GrpoSettings())
    assert "&id" not in text and "*id" not in text
    config = yaml.safe_load(text)
    model_keys = set(config["model_config"])
    assert {"model_name", "model_id", "model_source", "intermediate_ckpt_dir", "mesh"} <= model_keys
    for role in ROLES:
        assert set(config[role]) == model_keys
        assert config[role]["mesh"] == {"shape": "(4,2)", "axis_names": "('fsdp','tp')"}
    training = config["rl_training_config"]
    assert training["eval_every_n_steps"] == 10 and training["max_steps"] == 10
    assert "gradient_accumulation_steps" not in training  # RL derives it and refuses a value
    assert training["actor_optimizer_config"]["opt_type"] == "adamw"
    assert config["grpo_config"] == {
        "num_generations": 8,
        "num_iterations": 1,
        "beta": 0.08,
        "epsilon": 0.2,
    }


@pytest.mark.unit
def test_the_small_batch_profile_is_seed_002s_oom_fix_and_says_what_it_changes() -> None:
    seed = GrpoSettings()
    fixed = with_profile(seed, MemoryProfile.SMALL_BATCH)
    assert (fixed.batch_size, fixed.num_generations, fixed.mesh) == (1, 4, seed.mesh)
    assert profile_changes(seed, MemoryProfile.SMALL_BATCH) == [
        "batch_size: 16 -> 1",
        "num_generations: 8 -> 4",
    ]
    assert profile_changes(seed, MemoryProfile.NONE) == []
    assert grpo_config(fixed)["batch_size"] == 1


@pytest.mark.unit
def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(InputError, match="num_generations ≥ 2"):
        GrpoSettings(num_generations=1)
    with pytest.raises(InputError, match="differ in length"):
        Mesh(shape=(4, 2), axis_names=("fsdp",))


@pytest.mark.unit
def test_the_program_passes_secrets_by_name_and_starts_jax_distributed_first_on_multi_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Q" * 30)
    program = tunix_program(GrpoSettings(), hosts=4, profile=MemoryProfile.SMALL_BATCH, wandb=True)
    assert program.requirements == ("google-tunix[prod,cli]==0.1.7", "wandb")
    assert program.args == ("run_grpo.py", "grpo.yaml")
    assert program.secret_env == ("HF_TOKEN", "WANDB_API_KEY")
    assert program.required_secrets == ("HF_TOKEN",)
    assert program.log_format is LogFormat.TUNIX
    files = {f.name: f.text for f in program.files}
    assert "hf_" not in files["grpo.yaml"] and "HF_TOKEN:" not in files["grpo.yaml"]
    launcher = files["run_grpo.py"]
    assert "DISTRIBUTED = True" in launcher
    assert launcher.index("jax.distributed.initialize()") < launcher.index("from tunix")
    assert "DISTRIBUTED = False" in render_launcher(distributed=False)
    single = tunix_program(GrpoSettings(tokenizer_path="/models/qwen"), hosts=1)
    assert single.required_secrets == () and single.secret_env == ("HF_TOKEN",)


@pytest.mark.unit
def test_step_lines_become_zero_based_step_records_timed_from_the_line_before() -> None:
    with LOG.open() as f:
        parsed = read_log(f)
    assert [s.step for s in parsed.steps] == [0, 1, 2, 3, 4]
    first, second = parsed.steps[0], parsed.steps[1]
    assert first.loss == pytest.approx(0.000057)
    assert first.extra == {"perplexity": pytest.approx(1.000057)}
    assert first.seconds == pytest.approx(279.02)  # since the log's first line: start-up too
    assert second.seconds == pytest.approx(38.19)
    assert first.tflops_per_device is None and parsed.startup.log_start is not None
    assert parsed.lines == 7


@pytest.mark.unit
def test_both_spacings_of_the_step_line_parse_and_other_lines_do_not() -> None:
    one = parse_step("Train step 7 training loss: 1.5 - training perplexity: 4.48")
    two = parse_step(
        "I1122 06:04:44.120000 1 peft_trainer.py:489] Train step 7 training loss: 1.500000  - training perplexity: 4.481689"
    )
    assert one is not None and two is not None
    assert (one.step, one.loss, one.seconds) == (6, 1.5, 0.0)
    assert two.timestamp is not None
    assert parse_step("Eval step 7 loss: 1.5") is None
    assert parse_step("Train step seven training loss: x") is None


@pytest.mark.runtime
def test_the_written_file_loads_with_tunix_own_parser_and_the_dotted_override_trap_is_real(
    tmp_path: Path,
) -> None:
    runner = SubprocessRunner()
    python = install(TUNIX, runner, lambda _: None)  # reused when present, made when missing
    path = tmp_path / "grpo.yaml"
    path.write_text(render_grpo_config(with_profile(GrpoSettings(), MemoryProfile.SMALL_BATCH)))
    written, trap, no_token = check_with_tunix(
        runner,
        python,
        [
            TunixCase(config=path),
            TunixCase(config=path, overrides=("rl_training_config.max_steps=10",)),
            TunixCase(config=path, unset=("HF_TOKEN",)),
        ],
        env={"HF_TOKEN": "dummy-token-for-the-parser"},
    )
    assert written.ok, written.error
    seen = written.config
    assert (seen["batch_size"], seen["num_generations"], seen["max_steps"]) == (1, 4, 10)
    assert seen["eval_every_n_steps"] == 10
    assert seen["max_tokens_to_generate"] == 2048 and seen["kv_cache_size"] == 2048 + 256 + 256
    assert seen["meshes"] == {role: [[4, 2], ["fsdp", "tp"]] for role in ROLES}
    assert "tunix.cli.reward_fn.gsm8k.check_answer" in seen["reward_functions"]  # type: ignore[operator]
    assert not trap.ok and "eval_every_n_steps" in (trap.error or "")
    assert not no_token.ok and "HF_TOKEN" in (no_token.error or "")
