"""Nothing from a recipe, the configuration, a flag or a folder name becomes shell syntax.

The generated submit script runs under bash with a stand-in ``xpk``; the ``--command`` it hands
over is then run by bash the way the pod does (``bash -c``), with a stand-in ``python3`` that
records the words it was given. Whatever the inputs, the only program that runs is the
training program, and it sees each argument as one word.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, IRONWOOD, NOW, RECIPES, plan_for, write_tool
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.errors import InputError, RecipeError
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.plan.scripts import render_submit
from tpu_trainer.recipes.reader import parse_recipe

pytestmark = pytest.mark.unit

CLASSIC = IRONWOOD / "tinyllama-8b" / "8k-bf16-tpu7x-2x2x1" / "xpk" / "run_recipe.sh"
_RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["RECORD_FILE"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
"""


def _recipe_tree(root: Path, model: str, text: str | None = None) -> Path:
    folder = root / "training" / "ironwood" / model / "8k-bf16-tpu7x-2x2x1" / "xpk"
    folder.mkdir(parents=True)
    (folder / "run_recipe.sh").write_text(text or CLASSIC.read_text())
    return folder


def _plan(folder: Path, **opts: object) -> Plan:
    options = PlanOptions(user="test_user", now=NOW, **opts)  # type: ignore[arg-type]
    return plan_request(Request(str(folder), config_path=CONFIG), options)


def _submit_then_pod(plan: Plan, tmp_path: Path, env: dict[str, str] | None = None) -> list[str]:
    """Run the submit script, then its ``--command`` as the pod's bash does; the words the
    training program received."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "calls.jsonl"
    for tool in ("xpk", "python3"):
        write_tool(bin_dir, tool, _RECORDER)
    write_tool(bin_dir, "date", "#!/bin/sh\necho 20261122-0600\n")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = work / "submit.sh"
    script.write_text(render_submit(plan))
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_FILE": str(record), "HOME": str(work)}
    base.update(env or {})
    proc = subprocess.run(
        ["bash", str(script)], env=base, cwd=work, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    (xpk_call,) = [json.loads(line) for line in record.read_text().splitlines()]
    command = next(a for a in xpk_call if a.startswith("--command=")).removeprefix("--command=")
    record.unlink()
    pod = subprocess.run(
        ["bash", "-c", command], env=base, cwd=work, capture_output=True, text=True, check=False
    )
    assert pod.returncode == 0, pod.stderr
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [c[0] for c in calls] == ["python3"], calls
    assert sorted(p.name for p in work.iterdir()) == ["submit.sh"]
    return list(calls[0][1:])


def test_a_newline_in_the_model_folder_name_runs_nothing(tmp_path: Path) -> None:
    folder = _recipe_tree(tmp_path / "recipes", "tiny\ntouch PWNED\n")
    plan = _plan(folder)
    text = render_submit(plan)
    assert "\ntouch PWNED" not in text
    assert "tiny\\ntouch PWNED\\n" in text.splitlines()[1]
    _submit_then_pod(plan, tmp_path)
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize(
    ("inserted", "operator"),
    [
        ("steps=20; touch PWNED", "`;`"),
        ("steps=20 && touch PWNED", "`&&`"),
        ("steps=20 | tee PWNED", "`|`"),
        ("steps=20 & touch PWNED", "`&`"),
        ("steps=20\ntouch PWNED", "a newline"),
    ],
)
def test_shell_operators_in_maxtext_args_are_refused_with_the_line(
    inserted: str, operator: str
) -> None:
    text = CLASSIC.read_text().replace("steps=20 \\", inserted + " \\")
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "run_recipe.sh")
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "PWNED" in t)
    shown_line = line - 1 if operator == "a newline" else line
    assert info.value.message.startswith(f"run_recipe.sh:{shown_line}: MAXTEXT_ARGS holds")
    assert operator in info.value.message


def test_ifs_in_maxtext_args_is_refused() -> None:
    text = CLASSIC.read_text().replace("steps=20 \\", "steps=20${IFS}touch${IFS}PWNED \\")
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "run_recipe.sh")
    assert "run_recipe.sh:34:" in info.value.message
    assert "IFS" in info.value.message


def test_a_pod_time_ifs_in_the_command_is_refused() -> None:
    text = CLASSIC.read_text().replace("set -e &&", "set -e && echo a\\${IFS}b &&")
    with pytest.raises(RecipeError, match="IFS"):
        parse_recipe(text, "run_recipe.sh")


def test_quoted_operators_stay_one_argument(tmp_path: Path) -> None:
    text = CLASSIC.read_text().replace("steps=20 \\", "steps=20 'run_note=a;b && c' \\")
    folder = _recipe_tree(tmp_path / "recipes", "quoted", text)
    words = _submit_then_pod(_plan(folder), tmp_path)
    assert "run_note=a;b && c" in words


@pytest.mark.parametrize(
    "value", ["gs://bkt/a;{touch,PWNED}", "gs://bkt/a b", "gs://bkt/$(touch x)", "gs://bkt/a&&x"]
)
def test_a_config_value_with_shell_syntax_is_refused_naming_the_key(
    value: str, tmp_path: Path
) -> None:
    from tpu_trainer.config.load import read_config
    from tpu_trainer.errors import ConfigError

    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.read_text().replace("gs://demo-bucket/runs", json.dumps(value)))
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert "base_output_dir" in info.value.message


@pytest.mark.parametrize("value", ["a;touch PWNED", "x${IFS}y", "a b", "$(touch PWNED)", "a\nb"])
def test_var_values_with_shell_syntax_are_refused(value: str) -> None:
    with pytest.raises(InputError) as info:
        plan_for(RECIPES["storage"], variables=(("DATASET_MOUNT", value),))
    assert "DATASET_MOUNT" in info.value.message


def test_set_values_reach_the_pod_as_one_word(tmp_path: Path) -> None:
    folder = _recipe_tree(tmp_path / "recipes", "sets")
    value = "a;touch PWNED && b | c\nd `e` $HOME 'f'"
    words = _submit_then_pod(_plan(folder, overrides=(("run_note", value),)), tmp_path)
    assert f"run_note={value}" in words


def test_a_set_value_referring_to_a_local_variable_is_refused() -> None:
    with pytest.raises(InputError) as info:
        plan_for(RECIPES["classic"], overrides=(("run_name", "${IFS}"),))
    assert "${IFS}" in info.value.message


def test_a_recipe_variable_value_with_a_space_is_refused(tmp_path: Path) -> None:
    recipe = IRONWOOD / "densemodel-70b" / "4k-bf16-tpu7x-4x8x8-gcs" / "xpk" / "run_recipe.sh"
    text = recipe.read_text().replace('DATASET_MOUNT="/tmp/dataset"', 'DATASET_MOUNT="/a;b c"')
    folder = tmp_path / "recipes" / "training" / "ironwood" / "m" / "4k-bf16-tpu7x-4x8x8-gcs"
    folder.mkdir(parents=True)
    (folder / "run_recipe.sh").write_text(text)
    with pytest.raises(InputError) as info:
        _plan(folder)
    assert "DATASET_MOUNT" in info.value.message
    assert "recipe line" in info.value.message


_TOKEN_RECIPE = CLASSIC.read_text().replace(
    "steps=20 \\", "steps=20 hf_access_token=${HF_TOKEN} \\"
)


def test_a_secret_reference_stays_for_the_pods_environment(tmp_path: Path) -> None:
    folder = _recipe_tree(tmp_path / "recipes", "token", _TOKEN_RECIPE)
    plan = _plan(folder)
    text = render_submit(plan)
    secret = "hf_local_secret_value_0123456789"
    words = _submit_then_pod(plan, tmp_path, {"HF_TOKEN": secret})
    assert "hf_access_token=" + secret in words  # the pod's shell read its own HF_TOKEN
    assert secret not in text
    assert any(f.name == "secret-hf-token" for f in plan.findings)


def test_the_submitting_environment_never_fills_a_secret(tmp_path: Path) -> None:
    folder = _recipe_tree(tmp_path / "recipes", "token", _TOKEN_RECIPE)
    secret = "hf_local_secret_value_0123456789"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_tool(bin_dir, "xpk", _RECORDER)
    write_tool(bin_dir, "date", "#!/bin/sh\necho 20261122-0600\n")
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(_plan(folder)))
    record = tmp_path / "calls.jsonl"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_FILE": str(record), "HF_TOKEN": secret}
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True)
    assert secret not in record.read_text()
    assert 'hf_access_token=\\"${HF_TOKEN}\\"' in record.read_text()


def test_a_secret_given_with_var_is_refused_with_a_fix_that_names_the_pod() -> None:
    with pytest.raises(InputError) as info:
        plan_for(RECIPES["classic"], variables=(("HF_TOKEN", "hf_x"),))
    assert "never written" in info.value.message
    assert "--var" not in info.value.fix.replace("drop --var HF_TOKEN", "")


def test_an_unknown_reference_asks_for_var_and_var_works(tmp_path: Path) -> None:
    text = CLASSIC.read_text().replace("steps=20 \\", "steps=20 dataset_path=${DATA_DIR} \\")
    folder = _recipe_tree(tmp_path / "recipes", "unknown", text)
    with pytest.raises(InputError) as info:
        _plan(folder)
    assert info.value.fix == "pass --var DATA_DIR=VALUE"
    words = _submit_then_pod(_plan(folder, variables=(("DATA_DIR", "gs://d/x"),)), tmp_path)
    assert "dataset_path=gs://d/x" in words


def test_a_var_naming_nothing_in_the_recipe_is_refused() -> None:
    with pytest.raises(InputError, match="neither sets nor uses"):
        plan_for(RECIPES["classic"], variables=(("NOTHING_HERE", "x"),))


def test_a_var_for_a_shell_variable_is_refused() -> None:
    with pytest.raises(InputError, match="IFS"):
        plan_for(RECIPES["classic"], variables=(("IFS", "x"),))


@pytest.fixture(autouse=True)
def _bash_present() -> None:
    assert shutil.which("bash")


def test_a_secret_the_recipe_exports_empty_is_never_asked_for(tmp_path: Path) -> None:
    text = _TOKEN_RECIPE.replace('export ZONE=""', 'export ZONE=""\nexport HF_TOKEN=""')
    plan = _plan(_recipe_tree(tmp_path / "recipes", "token", text))
    assert "HF_TOKEN" not in [v.name for v in plan.variables]
    assert "export HF_TOKEN" not in render_submit(plan)
    assert any(f.name == "secret-hf-token" for f in plan.findings)


def test_a_secret_in_an_xpk_flag_is_refused_with_a_fix_that_names_the_arguments(
    tmp_path: Path,
) -> None:
    text = CLASSIC.read_text().replace("--enable-debug-logs", "--env=HF_TOKEN=${HF_TOKEN}")
    with pytest.raises(InputError) as info:
        _plan(_recipe_tree(tmp_path / "recipes", "flag", text))
    assert "--env refers to the secret HF_TOKEN" in info.value.message
    assert "--var" not in info.value.fix


def test_the_ray_job_refuses_a_secret_argument_with_a_fix_that_works(tmp_path: Path) -> None:
    from tpu_trainer.launchers.ray.entry import tpu_args

    plan = _plan(_recipe_tree(tmp_path / "recipes", "token", _TOKEN_RECIPE))
    with pytest.raises(InputError) as info:
        tpu_args(plan)
    assert "--backend gke" in info.value.fix
    assert "--var" not in info.value.fix


def test_a_setup_variable_with_commands_stays_the_recipes_visible_steps() -> None:
    text = (
        CLASSIC.read_text()
        .replace("# XLA Flags", 'SETUP="pip install -U pip &&"\n# XLA Flags')
        .replace('--command="set -e &&', '--command="${SETUP} set -e &&')
    )
    recipe = parse_recipe(text, "run_recipe.sh")
    assert recipe.steps[0].text() == "pip install -U pip"
