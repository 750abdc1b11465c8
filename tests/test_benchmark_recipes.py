"""Trillium and v5p recipes that run MaxText's benchmark runner, planned like run_recipe.sh."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import (
    CONFIG,
    FIXTURES,
    GOLDEN,
    NOW,
    RECIPES_ROOT,
    at_recipes_root,
    check_golden,
    plan_for,
)
from test_scripts import _run_submit
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.catalog.data_file import DataFileError
from tpu_trainer.errors import InputError, RecipeError
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.plan.scripts import render_submit, submitted_argv
from tpu_trainer.recipes.benchmark_invocation import find_invocation, pinned_revision
from tpu_trainer.recipes.benchmark_models import find_revision, parse_revisions, revisions
from tpu_trainer.recipes.benchmark_recipe import benchmark_recipe
from tpu_trainer.recipes.resolve import resolve_path

pytestmark = pytest.mark.unit

TRILLIUM = "training/trillium"
SINGLE = f"{TRILLIUM}/Llama3.1-8B-MaxText/v6e-16"
MULTI = f"{TRILLIUM}/Mixtral-8x7B-MaxText"
FIRST_FORM = f"{TRILLIUM}/GPT3-175B-MaxText/fp8"
V5P = "training/v5p/Llama3.1-405B-MaxText"


def _plan_text(relative: str) -> str:
    with at_recipes_root():
        data = plan_json(plan_for(relative))
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    return text.replace(str(FIXTURES), "<fixtures>")


@pytest.mark.parametrize(
    ("relative", "golden"),
    [(SINGLE, "trillium-1xv6e-16"), (MULTI, "trillium-2xv6e-256"), (V5P, "v5p-1024")],
)
def test_plan_json_golden(relative: str, golden: str, update_golden: bool) -> None:
    check_golden(
        GOLDEN / "benchmark_runner" / f"{golden}.json", _plan_text(relative), update_golden
    )


def test_single_slice_takes_the_models_tuning_and_the_runners_defaults() -> None:
    plan = plan_for(SINGLE)
    assert plan.recipe.device_type == "v6e-16"
    assert plan.recipe.num_slices == 1
    args = plan.recipe.program_args
    # tuning params of llama3_1_8b_8192_no_collective_matmul at tpu-recipes-v0.1.4, then the
    # runner's own arguments in its order
    assert args[:3] == ("per_device_batch_size=3", "ici_fsdp_parallelism=-1", "remat_policy=custom")
    tail = args[args.index("steps=20") :]
    assert tail[:3] == (
        "steps=20",
        "model_name=llama3.1-8b",
        "base_output_directory=${BASE_OUTPUT_DIR}",
    )
    assert tail[-1] == "run_name=${WORKLOAD_NAME}"
    assert "--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000" in plan.recipe.xla_flags
    assert plan.recipe.xpk_flag("--priority") == "medium"
    assert plan.recipe.xpk_flag("--max-restarts") == "0"
    assert plan.recipe.variable("MAXTEXT_REVISION") is not None


def test_multi_slice_reads_num_slices_and_num_steps() -> None:
    plan = plan_for(MULTI)
    assert plan.recipe.num_slices == 2
    assert plan.slice.device_type == "v6e-16x16"
    assert plan.recipe.arg_value("steps") == "30"
    assert plan.recipe.arg_value("model_name") == "mixtral-8x7b"


def test_v5p_readme_command_takes_its_device_type_from_the_title() -> None:
    plan = plan_for(V5P)
    assert plan.recipe.device_type == "v5p-1024"
    assert plan.recipe.arg_value("model_name") == "llama3.1-405b"
    exports = [s.text() for s in plan.recipe.steps if s.kind.value == "export"]
    assert "export MAXTEXT_REPO_ROOT=/deps" in exports


def test_the_first_runner_form_runs_train_py_after_installing_its_libtpu() -> None:
    plan = plan_for(FIRST_FORM)
    assert plan.recipe.entry.module == "MaxText/train.py"
    steps = [s.text() for s in plan.recipe.steps]
    assert steps[0].startswith("pip install libtpu-nightly==0.1.dev20241028 -f ")
    assert "export TPU_PREMAPPED_BUFFER_SIZE=4294967296" in steps
    assert plan.recipe.arg_value("enable_checkpointing") == "false"
    submit = render_submit(plan)
    assert "python3 MaxText/train.py MaxText/configs/base.yml" in submit
    assert "-m MaxText/train.py" not in submit


def _copy_fixture(tmp_path: Path, relative: str) -> Path:
    target = tmp_path / relative
    shutil.copytree(RECIPES_ROOT / relative, target)
    return target


def _refusal(tmp_path: Path, relative: str, name: str, old: str, new: str) -> RecipeError:
    """The error reading a copy of a fixture script with ``old`` replaced by ``new``."""
    script = _copy_fixture(tmp_path, relative) / name
    script.write_text(script.read_text().replace(old, new))
    with pytest.raises(RecipeError) as info:
        benchmark_recipe(script, script.read_text())
    return info.value


def test_unknown_model_name_lists_the_nearest_names(tmp_path: Path) -> None:
    error = _refusal(tmp_path, SINGLE, "llama3-1-8b-1xv6e-16.sh", "no_collective", "no_colective")
    message = error.message
    assert "MaxText at tpu-recipes-v0.1.4 has no benchmark model" in message
    assert "llama3_1_8b_8192_no_collective_matmul" in message.split("nearest names there:")[1]


def test_a_name_the_pin_lacks_is_planned_where_it_first_appears_and_reported(
    tmp_path: Path,
) -> None:
    folder = _copy_fixture(tmp_path, SINGLE)
    script = folder / "llama3-1-8b-1xv6e-16.sh"
    script.write_text(
        script.read_text().replace(
            "llama3_1_8b_8192_no_collective_matmul", "gemma3_12b_32768_v6e256"
        )
    )
    recipe = benchmark_recipe(script, script.read_text())
    assert recipe.arg_value("model_name") == "gemma3-12b"
    [problem] = recipe.problems
    assert problem.name == "recipe-maxtext-revision"
    assert "pins MaxText tpu-recipes-v0.1.4" in problem.message
    assert "planned at tpu-recipes-v0.1.5" in problem.message
    assert "--var MAXTEXT_REVISION=tpu-recipes-v0.1.5" in problem.fix
    chosen = benchmark_recipe(
        script, script.read_text(), {"MAXTEXT_REVISION": "tpu-recipes-v0.1.5"}
    )
    assert chosen.problems == ()
    assert chosen.program_args == recipe.program_args


def test_a_missing_subcommand_is_planned_as_the_corrected_command_and_reported(
    tmp_path: Path,
) -> None:
    folder = _copy_fixture(tmp_path, SINGLE)
    script = folder / "llama3-1-8b-1xv6e-16.sh"
    text = script.read_text()
    written = benchmark_recipe(script, text)
    bare = benchmark_recipe(script, text.replace("benchmark_runner xpk", "benchmark_runner"))
    [problem] = bare.problems
    assert problem.name == "recipe-runner-subcommand"
    assert "takes `xpk` before its options" in problem.message
    assert "benchmark_runner.py xpk" in problem.fix
    assert (bare.program_args, bare.xla_flags) == (written.program_args, written.xla_flags)
    with pytest.raises(RecipeError, match="is not planned"):
        benchmark_recipe(script, text.replace("benchmark_runner xpk", "benchmark_runner on-device"))


def test_options_are_checked_against_the_pinned_runner(tmp_path: Path) -> None:
    folder = _copy_fixture(tmp_path, SINGLE)
    script = folder / "llama3-1-8b-1xv6e-16.sh"
    text = script.read_text()
    with pytest.raises(RecipeError, match="does not plan"):
        benchmark_recipe(
            script, text.replace("--num_slices=1", "--num_slices=1 --use_pathways=true")
        )
    with pytest.raises(RecipeError, match="has no --tpu_kind"):
        benchmark_recipe(script, text.replace("--num_slices=1", "--tpu_kind=x"))


def test_a_readme_without_a_pin_asks_for_the_revision(tmp_path: Path) -> None:
    folder = _copy_fixture(tmp_path, SINGLE)
    (folder / "README.md").unlink()
    script = folder / "llama3-1-8b-1xv6e-16.sh"
    with pytest.raises(RecipeError) as info:
        benchmark_recipe(script, script.read_text())
    assert "--var MAXTEXT_REVISION=" in info.value.fix


def test_pins_and_invocations_are_read_in_both_forms() -> None:
    assert pinned_revision("run `git checkout tpu-recipes-v0.1.4` first") == "tpu-recipes-v0.1.4"
    assert (
        pinned_revision("[maxtext](https://x/maxtext.git)@261a8be0fc5e909e") == "261a8be0fc5e909e"
    )
    assert pinned_revision("nothing here") is None
    call = find_invocation(
        "python3 benchmarks/benchmark_runner.py --zone=$ZONE --base_docker_image img\n",
        "x.sh",
        markdown=False,
    )
    assert call.subcommand == ""
    assert call.options["zone"].reference == "ZONE"
    assert call.options["base_docker_image"].text == "img"
    with pytest.raises(RecipeError, match=r"no `python3 -m benchmarks\.benchmark_runner`"):
        find_invocation("```\necho hi\n```\n", "README.md", markdown=True)


def test_revisions_resolve_by_tag_and_by_short_commit() -> None:
    assert find_revision("tpu-recipes-v0.1.4") is not None
    by_commit = find_revision("3eb77db")
    assert by_commit is not None and by_commit.key.startswith("3eb77db3")
    assert find_revision("0000000") is None
    assert all(r.models for r in revisions().values())


def test_a_folder_with_several_runner_scripts_asks_which(tmp_path: Path) -> None:
    folder = _copy_fixture(tmp_path, MULTI)
    shutil.copy(folder / "mixtral-8x7b-2xv6e-256.sh", folder / "mixtral-8x7b-4xv6e-256.sh")
    with pytest.raises(InputError, match="holds 2 benchmark_runner scripts"):
        resolve_path(folder)
    ref = resolve_path(folder / "mixtral-8x7b-4xv6e-256.sh")
    assert ref.model == "Mixtral-8x7B-MaxText"


def test_a_malformed_data_file_names_the_key() -> None:
    with pytest.raises(DataFileError, match=r"revisions\.r1: runner must be a mapping"):
        parse_revisions("revisions:\n  r1:\n    commit: ''\n")


@pytest.mark.parametrize("relative", [SINGLE, MULTI, FIRST_FORM, V5P])
def test_submit_script_hands_the_pod_the_planned_arguments_and_flags(
    relative: str, tmp_path: Path, fake_bin: Path
) -> None:
    plan = plan_for(relative)
    code, calls, err = _run_submit(plan, tmp_path, fake_bin, {"PROJECT_NUMBER": "123456789012"})
    assert code == 0, err
    assert calls == [submitted_argv(plan, project_number="123456789012")]
    command = next(a for a in calls[0] if a.startswith("--command=")).removeprefix("--command=")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    words = list(lexer)
    start = words.index("MaxText/configs/base.yml") + 1
    assert words[start:] == [plan.expand(a) for a in plan.program_arg_texts]
    libtpu = next(w for w in words if w.startswith("LIBTPU_INIT_ARGS="))
    assert libtpu.removeprefix("LIBTPU_INIT_ARGS=").split() == list(plan.xla_flags)


_SCRIPT_ENTRY = """\
export WORKLOAD_IMAGE=""
xpk workload create --device-type=v6e-8 --docker-image="${{WORKLOAD_IMAGE}}" \\
  --command="{command}"
"""


def test_a_trainer_run_as_a_script_is_the_entry_and_other_scripts_are_setup() -> None:
    from tpu_trainer.recipes.reader import parse_recipe

    old = parse_recipe(
        _SCRIPT_ENTRY.format(command="python3 MaxText/train.py MaxText/configs/base.yml steps=5")
    )
    assert (old.entry.module, old.entry.base_config) == (
        "MaxText/train.py",
        "MaxText/configs/base.yml",
    )
    assert old.program_args == ("steps=5",)
    setup_first = parse_recipe(
        _SCRIPT_ENTRY.format(
            command="python3 tools/prepare.py && python3 -m MaxText.train MaxText/configs/base.yml steps=5"
        )
    )
    assert setup_first.entry.module == "MaxText.train"
    assert [s.kind.value for s in setup_first.steps] == ["setup", "entry"]


def test_mixtral_8x22b_scripts_plan_at_the_first_revision_with_the_model_and_fail_two_checks(
    tmp_path: Path,
) -> None:
    """The Mixtral-8x22B scripts name `mixtral_8x22b_dropped` with the pre-subcommand runner
    form and pin 261a8be0, which predates the model: as written the runner refuses them at
    every revision, so the plan is what the corrected command submits, with both reported."""
    name = "mixtral_8x22b_dropped"
    folder = _copy_fixture(tmp_path, FIRST_FORM)
    script = folder / "gpt3-175b-v6e-256.sh"
    script.write_text(script.read_text().replace('"gpt_3_175b"', f'"{name}"'))
    readme = folder / "README.md"
    pin = "261a8be0fc5e909ef9da0521df62549e650ebb79"
    readme.write_text(readme.read_text().replace("e7292a3a572792a0d797fc8977b21d0f255729f1", pin))
    plan = plan_request(
        Request(str(script), config_path=CONFIG), PlanOptions(user="test_user", now=NOW)
    )
    assert plan.recipe.arg_value("model_name") == "mixtral-8x22b"
    revision = plan.recipe.variable("MAXTEXT_REVISION")
    assert revision is not None
    assert revision.template == "0bba3cf961abdce3ab94becb77888f9f53938181"
    failed = {f.name: f for f in plan.findings if f.status.value == "fail"}
    assert set(failed) == {"recipe-maxtext-revision", "recipe-runner-subcommand"}
    assert "pins MaxText 261a8be0 (2024-11-21)" in failed["recipe-maxtext-revision"].message
    assert "planned at 0bba3cf9 (2025-02-12)" in failed["recipe-maxtext-revision"].message
    assert "--var MAXTEXT_REVISION=0bba3cf9" in failed["recipe-maxtext-revision"].fix
    assert "benchmark_runner.py xpk" in failed["recipe-runner-subcommand"].fix
