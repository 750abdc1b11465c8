"""README recipes that submit a training script (``--command "bash <script> ..."``): the
README expanded as the submitting shell would, the script's steps as bash would run them, at
the MaxText revision the README implies, planned like any recipe."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import (
    FIXTURES,
    GOLDEN,
    RECIPES_ROOT,
    at_recipes_root,
    check_golden,
    plan_for,
)
from test_scripts import _run_submit
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.errors import InputError, RecipeError
from tpu_trainer.plan.plan import Level
from tpu_trainer.recipes import script_eval as script_eval_module
from tpu_trainer.recipes import script_recipe as script_recipe_module
from tpu_trainer.recipes.recipe import StepKind
from tpu_trainer.recipes.resolve import resolve_path
from tpu_trainer.recipes.script_eval import MissingScriptError, evaluate
from tpu_trainer.recipes.script_parse import parse_script
from tpu_trainer.recipes.script_readme import find_script_readme, submission
from tpu_trainer.recipes.script_recipe import pod_run, script_recipe
from tpu_trainer.recipes.script_words import Scope, render
from tpu_trainer.recipes.training_scripts import (
    KnownReadme,
    blob_id,
    training_scripts,
)

pytestmark = pytest.mark.unit

V5P = "training/v5p"
DENSE = f"{V5P}/Dense7B-Script"
SIZED = f"{V5P}/Sized-175B-Script"
MOE = f"{V5P}/MoE-8x7B-Script"
DIFFUSION = f"{V5P}/DiffusionXL-Script"
OLD, NEW = "1de063ea4541f18bdad7a54102e60fcbfa3f19f4", "a6a5f32f63045ae1b09a65e7feee1d35dd4fbc36"


class Files:
    """Scripts by path, for the evaluator."""

    def __init__(self, scripts: dict[str, str], exists: dict[str, bool] | None = None) -> None:
        self.scripts = scripts
        self.known = exists or {}

    def script(self, path: str) -> tuple[str, str] | None:
        return (self.scripts[path], path) if path in self.scripts else None

    def exists(self, path: str) -> bool | None:
        return True if path in self.scripts else self.known.get(path)


def _readme(relative: str) -> Path:
    return RECIPES_ROOT / relative / "README.md"


def _entry(command: str, files: Files) -> list[str]:
    run = evaluate(command, files, "cmd")
    return [render(w) for w in next(s for s in run.steps if s.kind is StepKind.ENTRY).words]


# ---- the script, as bash runs it ------------------------------------------------------------
SCRIPT = """\
set -e
export MODE="train"
for ARGUMENT in "$@"; do
    IFS='=' read -r KEY VALUE <<< "$ARGUMENT"
    export "$KEY"="$VALUE"
done
FIRST=${1:-${FIRST:-none}}
if [ -n "$RUN_NAME" ]; then
  export M_RUN_NAME=$RUN_NAME
elif [ "$MODE" = "x" ]; then
  echo never
else
  export M_RUN_NAME=unnamed
fi
export FLAGS="--a=1"
FLAGS+=" --b=2"
python3 -m MaxText.$MODE MaxText/configs/base.yml first="$FIRST" out=$OUTPUT_PATH \\
  empty=$UNSET split=$WORDS
"""


@pytest.mark.parametrize(
    "args",
    [
        "RUN_NAME=r1 OUTPUT_PATH=gs://b/ WORDS='x y'",
        "OUTPUT_PATH=gs://b/c=d= RUN_NAME=",
        "RUN_NAME=a=b= MODE=train",
    ],
)
def test_a_script_reads_as_bash_runs_it(args: str, tmp_path: Path) -> None:
    """The evaluator against bash itself, with a stand-in python3 recording its argv and
    environment."""
    (tmp_path / "s.sh").write_text(SCRIPT)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    (bin_dir / "python3").write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {record}\n'
        f'printf "%s\\n" "$M_RUN_NAME" "$FLAGS" >> {record}\n'
    )
    (bin_dir / "python3").chmod(0o755)
    command = f"bash s.sh {args}"
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.returncode == 0
    *argv, run_name, flags = record.read_text().split("\n")[:-1]
    run = evaluate(command, Files({"s.sh": SCRIPT}), "cmd")
    entry = next(s for s in run.steps if s.kind is StepKind.ENTRY)
    assert list(entry.words[1:]) == argv
    exports = {s.words[0]: s.words[1] for s in run.steps if s.kind is StepKind.EXPORT}
    assert (exports["M_RUN_NAME"], exports["FLAGS"]) == (run_name, flags)


def test_a_nested_script_sees_only_what_is_exported_and_its_chmod_is_dropped() -> None:
    outer = 'LOCAL=hidden\nexport SHOWN=yes\nchmod +x inner.sh\n./inner.sh 4 "a b"\n'
    inner = 'python3 -m MaxText.train MaxText/configs/base.yml n=$1 s="$2" l=$LOCAL e=$SHOWN\n'
    run = evaluate("bash outer.sh", Files({"outer.sh": outer, "inner.sh": inner}), "cmd")
    assert [p for p, _ in run.scripts] == ["outer.sh", "inner.sh"]
    assert not any(s.words[:1] == ("chmod",) for s in run.steps)
    entry = next(s for s in run.steps if s.kind is StepKind.ENTRY)
    assert entry.words[-4:] == ("n=4", "s=a b", "l=", "e=yes")


def test_a_script_stops_where_bash_would() -> None:
    unset = "set -u\npython3 -m MaxText.train MaxText/configs/base.yml x=$NOPE\n"
    with pytest.raises(RecipeError, match=r"s\.sh:2: .*NOPE is unset.*set -u"):
        evaluate("bash s.sh", Files({"s.sh": unset}), "cmd")
    loop = 'set -e\nfor A in "$@"; do IFS="=" read -r K V <<< "$A"; export "$K"="$V"; done\n'
    with pytest.raises(RecipeError, match=r"not a valid identifier.*set -e"):
        evaluate("bash s.sh run-1", Files({"s.sh": loop}), "cmd")
    with pytest.raises(RecipeError, match=r"s\.sh:1: command substitution"):
        evaluate("bash s.sh", Files({"s.sh": "X=$(date)\n"}), "cmd")


def test_a_script_known_to_be_missing_is_reported_and_an_unknown_one_is_a_setup_step() -> None:
    with pytest.raises(MissingScriptError) as info:
        evaluate("bash gone.sh", Files({}, {"gone.sh": False}), "cmd")
    assert info.value.path == "gone.sh"
    run = evaluate(
        "bash preflight.sh && python3 -m MaxText.train MaxText/configs/base.yml", Files({}), "c"
    )
    assert [s.kind for s in run.steps] == [StepKind.SETUP, StepKind.ENTRY]


def test_a_clone_checked_out_in_the_script_is_recorded_with_its_directory() -> None:
    script = "git clone https://x/maxdiffusion.git\ncd maxdiffusion\ngit checkout $1\npython t.py\n"
    run = evaluate("bash s.sh abc1234", Files({"s.sh": script}), "cmd")
    assert run.checkouts == (("maxdiffusion", "abc1234"),)
    assert run.steps[-1].cwd == "maxdiffusion"


# ---- the README, as the submitting shell expands it -----------------------------------------
def test_the_readme_hands_xpk_its_flags_and_the_command() -> None:
    readme = find_script_readme(_readme(DENSE).read_text(), "README.md")
    assert readme is not None and readme.launcher == "python3 xpk.py"
    scope = Scope(values={"USER": "me", "PROJECT": "p"})
    sub = submission(readme, scope, {})
    assert sub.argv[:2] == ("--cluster", "my-cluster")
    assert "--docker-image=gcr.io/p/me_runner" in sub.argv
    assert sub.argv[-2:] == (
        "--command",
        "   bash MaxText/configs/v5p/llama2_7b.sh RUN_NAME=dense-7b-run "
        "OUTPUT_PATH=gs://my-bucket/out/",
    )


def test_a_readme_with_a_block_per_size_takes_the_first_or_the_one_asked_for() -> None:
    pinned = plan_for(SIZED)
    assert pinned.recipe.device_type == "v5p-1024"
    assert not [f for f in pinned.findings if f.status is Level.FAIL]
    custom = plan_for(SIZED, variables=(("TPU_TYPE", "v5p-4x8x16"),))  # the v5p-1024 block
    assert custom.recipe.device_type == "v5p-4x8x16"
    assert custom.recipe.program_args == pinned.recipe.program_args
    readme = find_script_readme(_readme(SIZED).read_text(), "README.md")
    assert readme is not None and readme.sizes() == ["v5p-1024", "v5p-2048"]
    first = submission(readme, Scope(), {})
    assert first.size == "v5p-1024" and "--tpu-type=v5p-1024" in first.argv
    chosen = submission(readme, Scope(), {}, "v5p-2048")
    assert chosen.argv[-1].startswith("bash MaxText/configs/v5p/gpt3_175b/v5p_2048.sh big-run")
    with pytest.raises(RecipeError) as info:
        submission(readme, Scope(), {}, "v5p-512")
    assert "v5p-1024, v5p-2048" in info.value.fix


# ---- planned --------------------------------------------------------------------------------
def _plan_text(relative: str, **opts: object) -> str:
    with at_recipes_root():
        data = plan_json(plan_for(relative, **opts))
    return json.dumps(data, indent=2, sort_keys=True).replace(str(FIXTURES), "<fixtures>") + "\n"


@pytest.mark.parametrize(("relative", "golden"), [(DENSE, "dense-7b"), (DIFFUSION, "diffusion-xl")])
def test_plan_json_golden(relative: str, golden: str, update_golden: bool) -> None:
    check_golden(GOLDEN / "script_readme" / f"{golden}.json", _plan_text(relative), update_golden)


def test_a_pinned_readme_plans_the_scripts_training_program() -> None:
    plan = plan_for(DENSE)
    recipe = plan.recipe
    assert recipe.device_type == "v5p-512"
    assert recipe.entry.module == "MaxText.train"
    assert recipe.program_args[:3] == (
        "model_name=llama2-7b",
        "base_output_directory=${BASE_OUTPUT_DIR}",
        "dataset_path=",
    )
    exports = [s.text() for s in recipe.steps if s.kind is StepKind.EXPORT]
    assert "export M_RUN_NAME=${WORKLOAD_NAME}" in exports
    assert [s.text() for s in recipe.steps if s.kind is StepKind.SETUP] == ["bash preflight.sh"]
    assert len(recipe.xla_flags) == 10
    assert [f.name for f in recipe.xpk_flags][:3] == ["--cluster", "--workload", "--tpu-type"]
    [note] = [f for f in plan.findings if f.name == "recipe-maxtext-revision"]
    assert (
        note.status is Level.PASS and "1de063ea (2025-09-05): pinned by the README" in note.message
    )


def test_the_submit_script_hands_the_pod_the_scripts_words(tmp_path: Path, fake_bin: Path) -> None:
    plan = plan_for(DENSE)
    code, calls, err = _run_submit(plan, tmp_path, fake_bin, {})
    assert code == 0, err
    command = next(a for a in calls[0] if a.startswith("--command=")).removeprefix("--command=")
    words = shlex.split(command.replace("&&", " && "))
    start = words.index("MaxText/configs/base.yml") + 1
    assert words[start : start + len(plan.program_args)] == [
        plan.expand(a) for a in plan.program_arg_texts
    ]
    assert f"M_RUN_NAME={plan.workload_name}" in words
    assert "--tpu-type=v5p-4x8x8" in calls[0]


def test_a_file_missing_at_the_readmes_revision_is_planned_at_the_last_one_with_it() -> None:
    plan = plan_for(MOE)
    [problem] = [f for f in plan.findings if f.name == "recipe-maxtext-revision"]
    assert problem.status is Level.FAIL
    assert "MaxText/train.py, which MaxText a6a5f32f (2025-10-08; pinned by the README)" in (
        problem.message
    )
    assert "moved to src/MaxText/train.py in 28e5097a" in problem.message
    assert "planned at 1de063ea (2025-09-05)" in problem.message
    assert "--var MAXTEXT_REVISION=1de063ea" in problem.fix
    assert plan.recipe.entry.module == "MaxText/train.py"
    assert plan.recipe.arg_value("model_name") == "mixtral-8x7b"
    assert plan.recipe.variable("MAXTEXT_REVISION") is not None
    chosen = plan_for(MOE, variables=(("MAXTEXT_REVISION", "1de063ea"),))
    assert not [f for f in chosen.findings if f.status is Level.FAIL]
    with pytest.raises(RecipeError, match="no shipped MaxText revision has"):
        plan_for(MOE, variables=(("MAXTEXT_REVISION", "a6a5f32f"),))


def test_an_unpinned_readme_runs_at_the_revision_of_its_last_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = _readme(SIZED).read_text()
    text = "\n".join(ln for ln in pinned.splitlines() if not ln.startswith("Test Env")) + "\n"
    with pytest.raises(RecipeError) as info:
        script_recipe(_readme(SIZED), text)
    assert "pins none" in str(info.value) and "1de063ea (2025-09-05)" in info.value.fix
    data = training_scripts()
    known = KnownReadme(
        blob_id(text.encode()), "x/README.md", "c0ffee00", "2025-10-08", {"maxtext": NEW}
    )
    monkeypatch.setattr(
        script_recipe_module,
        "training_scripts",
        lambda: replace(data, readmes={**data.readmes, known.blob: known}),
    )
    recipe = script_recipe(_readme(SIZED), text)
    [problem] = recipe.problems
    assert "current on 2025-10-08, the README's last change in tpu-recipes (c0ffee00)" in (
        problem.message
    )
    assert "v5p_1024.sh, which MaxText a6a5f32f" in problem.message
    assert recipe.arg_value("ici_fsdp_parallelism") == "64"
    bigger = script_recipe(_readme(SIZED), text, {"TPU_TYPE": "v5p-2048"})
    assert bigger.device_type == "v5p-2048"
    assert bigger.arg_value("ici_fsdp_parallelism") == "16"
    assert bigger.arg_value("run_name") == "${WORKLOAD_NAME}"


def test_a_readme_leaving_the_tpu_type_open_plans_the_smallest_slice_and_says_so() -> None:
    plan = plan_for(DIFFUSION)
    failed = [f for f in plan.findings if f.status is Level.FAIL]
    assert [f.name for f in failed] == ["recipe-tpu-type"]
    assert "--var TPU_TYPE=" in failed[0].fix
    assert plan.slice.device_type == "v5p-2x2x1"
    [checkout] = [f for f in plan.findings if f.name == "recipe-maxdiffusion-revision"]
    assert checkout.status is Level.PASS and "00150750 (2024-09-25)" in checkout.message
    assert plan.recipe.framework.value == "maxdiffusion"
    assert plan.recipe.args_variable == "MAXDIFFUSION_ARGS"
    assert plan.recipe.xla_flags == (
        "--xla_tpu_enable_async_collective_fusion=true",
        "--xla_enable_async_all_reduce=true",
    )
    steps = [s.text() for s in plan.recipe.steps if s.kind is StepKind.SETUP]
    assert steps[:2] == [
        "rm -rf maxdiffusion",
        "git clone https://github.com/google/maxdiffusion.git",
    ]
    sized = plan_for(DIFFUSION, variables=(("TPU_TYPE", "v5p-32"),))
    assert sized.slice.device_type == "v5p-2x2x4"
    assert not [f for f in sized.findings if f.status is Level.FAIL]


def test_a_tensorflow_readme_is_refused_with_what_to_do_instead() -> None:
    for path in (RECIPES_ROOT / V5P / "Ranking-TF", _readme(f"{V5P}/Ranking-TF")):
        with pytest.raises(InputError) as info:
            resolve_path(path)
        assert "trains with TensorFlow" in info.value.message
        assert "MaxText, MaxDiffusion, Tunix and Hugging Face" in info.value.message
        assert "tpu-trainer hf" in info.value.fix


def test_a_recipe_folder_resolves_to_its_readme() -> None:
    ref = resolve_path(RECIPES_ROOT / DENSE)
    assert ref.script.name == "README.md" and ref.model == "Dense7B-Script"


def test_the_own_script_is_found_in_the_recipes_scripts_folder(tmp_path: Path) -> None:
    folder = tmp_path / "MoE"
    shutil.copytree(RECIPES_ROOT / MOE, folder)
    found = pod_run(folder / "README.md", (folder / "README.md").read_text())
    [(invoked, origin)] = found.run.scripts
    assert invoked == "MaxText/configs/run_moe.sh"
    assert origin == str(folder / "scripts" / "run_moe.sh")
    (folder / "scripts" / "run_moe.sh").unlink()
    with pytest.raises(RecipeError, match="runs no `python3` training program"):
        pod_run(folder / "README.md", (folder / "README.md").read_text())


# ---- against bash ---------------------------------------------------------------------------
TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _verify(folder: Path) -> subprocess.CompletedProcess[str]:
    tool = str(TOOLS / "verify_recipes_with_bash.py")
    return subprocess.run(
        [sys.executable, tool, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bash_check_agrees_with_the_reader_on_every_size_of_every_fixture() -> None:
    done = _verify(RECIPES_ROOT / V5P)
    assert done.returncode == 0, done.stdout + done.stderr
    for shown in (
        "OK Dense7B-Script/README.md (",
        "OK Sized-175B-Script/README.md [TPU_TYPE=v5p-1024] (",
        "OK Sized-175B-Script/README.md [TPU_TYPE=v5p-2048] (",
        "OK MoE-8x7B-Script/README.md (",
        "OK DiffusionXL-Script/README.md (",
    ):
        assert shown in done.stdout, done.stdout


def test_bash_check_catches_a_script_the_reader_misreads(tmp_path: Path) -> None:
    folder = tmp_path / "v5p" / "MoE-8x7B-Script"
    shutil.copytree(RECIPES_ROOT / MOE, folder)
    script = folder / "scripts" / "run_moe.sh"
    # `${X:+...}` is outside what the reader expands: it must say so, never guess
    script.write_text(script.read_text().replace("steps=10", "steps=${RUN_NAME:+10}"))
    done = _verify(tmp_path)
    assert done.returncode == 1
    assert "ERROR v5p/MoE-8x7B-Script/README.md: " in done.stdout
    assert "run_moe.sh:18: unsupported parameter expansion '${RUN_NAME:+10}'" in done.stdout


def test_bash_check_reports_a_reading_that_differs_from_bash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison itself can fail: a reader that splits KEY=VALUE one character wrong."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    import verify_scripts_with_bash as harness
    from tpu_trainer.recipes import script_words

    right = script_words.read_fields
    monkeypatch.setattr(
        script_eval_module,
        "read_fields",
        lambda text, names, ifs: {**right(text, names, ifs), names[-1]: "wrong"},
    )
    sandbox = harness.Sandbox(shutil.which("bash") or "bash", sys.executable, [], 60)
    [(ok, line)] = harness.check_script_readme(_readme(MOE), "moe", tmp_path, sandbox)
    assert not ok and line.startswith("MISMATCH moe: program reader=")


def test_the_shipped_data_knows_the_v5p_readmes_and_reads_every_script() -> None:
    data = training_scripts()
    assert sorted(r.path.split("/")[2] for r in data.readmes.values()) == [
        "Diffusion-2-MaxDiffusion",
        "GPT3-175B-MaxText",
        "Llama2-7B-Maxtext",
        "Mixtral-8X7B-Maxtext",
        "SDXL-MaxDiffusion",
    ]
    old, new = data.revisions["maxtext"][OLD], data.revisions["maxtext"][NEW]
    assert old.files["MaxText/train.py"] and new.files["MaxText/train.py"] is False
    assert len(old.scripts) == 8  # llama2_7b.sh, six gpt3 sizes and their base script
    for revision in (old, new):
        for path, text in revision.scripts.items():
            assert parse_script(text, path)
