"""The generated scripts: golden files, shellcheck, bash itself, and xpk's own parser."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GOLDEN, RECIPES, check_golden, plan_for, write_tool
from tpu_trainer.infra.xpk_parser import check_xpk_argvs
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.scripts import render_setup, render_submit, submitted_argv

KINDS = sorted(RECIPES)

_ARGV_RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["RECORD_FILE"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    assert Path(found).exists(), "shellcheck is missing: run `bash scripts/test.sh`"
    return found


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.unit
def test_submit_script_matches_golden(kind: str, update_golden: bool) -> None:
    check_golden(GOLDEN / kind / "submit.sh", render_submit(plan_for(RECIPES[kind])), update_golden)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.unit
def test_setup_script_matches_golden(kind: str, update_golden: bool) -> None:
    check_golden(GOLDEN / kind / "setup.sh", render_setup(plan_for(RECIPES[kind])), update_golden)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.unit
def test_generated_scripts_pass_shellcheck(kind: str, tmp_path: Path) -> None:
    plan = plan_for(RECIPES[kind])
    files = []
    for name, text in (("setup.sh", render_setup(plan)), ("submit.sh", render_submit(plan))):
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    proc = subprocess.run(
        [_shellcheck(), "--shell=bash", *files], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _run_submit(
    plan: Plan, tmp_path: Path, fake_bin: Path, env_extra: dict[str, str]
) -> tuple[int, list[list[str]], str]:
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(plan))
    record = tmp_path / "calls.jsonl"
    write_tool(fake_bin, "xpk", _ARGV_RECORDER)
    write_tool(fake_bin, "date", "#!/bin/sh\necho 20261122-0600\n")
    env = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "RECORD_FILE": str(record),
        "HOME": str(tmp_path),
        **env_extra,
    }
    proc = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    calls = (
        [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    )
    return proc.returncode, calls, proc.stderr


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.unit
def test_submit_script_under_bash_hands_xpk_exactly_the_planned_argv(
    kind: str, tmp_path: Path, fake_bin: Path
) -> None:
    plan = plan_for(RECIPES[kind])
    code, calls, err = _run_submit(plan, tmp_path, fake_bin, {"PROJECT_NUMBER": "123456789012"})
    assert code == 0, err
    assert calls == [submitted_argv(plan, project_number="123456789012")]
    unset = _run_submit(plan, tmp_path, fake_bin, {})[1][-1]  # by hand: xpk asks for the number
    assert "--project-number=" in unset  # the flag, empty


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.unit
def test_submit_script_words_survive_both_shells(kind: str, tmp_path: Path, fake_bin: Path) -> None:
    """The pod's shell must see exactly the program arguments and XLA flags of the plan."""
    plan = plan_for(RECIPES[kind])
    code, calls, err = _run_submit(plan, tmp_path, fake_bin, {})
    assert code == 0, err
    command = next(a for a in calls[0] if a.startswith("--command=")).removeprefix("--command=")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    words = list(lexer)
    module_at = words.index(plan.recipe.entry.module)
    start = module_at + (2 if plan.recipe.entry.base_config else 1)
    end = next(
        (i for i in range(start, len(words)) if words[i] in ("&&", "|", ";", "||")), len(words)
    )
    assert words[start:end] == [plan.expand(a) for a in plan.program_arg_texts]
    libtpu = next(w for w in words if w.startswith("LIBTPU_INIT_ARGS="))
    assert libtpu.removeprefix("LIBTPU_INIT_ARGS=").split() == list(plan.xla_flags)


@pytest.mark.unit
def test_submit_script_default_workload_name_is_valid(tmp_path: Path, fake_bin: Path) -> None:
    plan = plan_for(RECIPES["classic"])
    code, calls, _ = _run_submit(plan, tmp_path, fake_bin, {})
    assert code == 0
    assert f"--workload={plan.workload_name}" in calls[0]
    assert plan.workload_name == "test-user-tinyllama-8b-20261122-0600"


@pytest.mark.parametrize("bad", ["Bad_Name", "a--b", "x" * 41, "9starts-with-digit", "ends-"])
@pytest.mark.unit
def test_submit_script_refuses_an_invalid_workload_name(
    bad: str, tmp_path: Path, fake_bin: Path
) -> None:
    plan = plan_for(RECIPES["classic"])
    code, calls, err = _run_submit(plan, tmp_path, fake_bin, {"WORKLOAD_NAME": bad})
    assert code == 2
    assert calls == []
    assert "not a valid xpk workload name" in err


@pytest.mark.xpk
@pytest.mark.runtime
def test_xpk_parser_accepts_every_generated_workload_create() -> None:
    argvs = [submitted_argv(plan_for(RECIPES[kind])) for kind in KINDS]
    results = check_xpk_argvs(argvs)
    assert [r["ok"] for r in results] == [True] * len(KINDS), results
    for argv, result in zip(argvs, results, strict=True):
        args = result["args"]
        assert isinstance(args, dict)
        assert f"--workload={args['workload']}" in argv
        assert args["command"] == next(a for a in argv if a.startswith("--command="))[10:]


@pytest.mark.xpk
@pytest.mark.runtime
def test_xpk_parser_rejects_a_misspelled_flag() -> None:
    argv = submitted_argv(plan_for(RECIPES["classic"]))
    argv = [a.replace("--num-slices=", "--num-slice=") for a in argv]
    (result,) = check_xpk_argvs([argv])
    assert result["ok"] is False


def _run_setup(plan: Plan, tmp_path: Path, fake_bin: Path, image_exists: bool) -> list[list[str]]:
    script = tmp_path / "setup.sh"
    script.write_text(render_setup(plan))
    record = tmp_path / "setup_calls.jsonl"
    for tool in ("gcloud", "git", "docker"):
        write_tool(fake_bin, tool, _ARGV_RECORDER)
    env = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "RECORD_FILE": str(record),
        "HOME": str(tmp_path),
    }
    if not image_exists:
        # docker manifest inspect fails; every other docker call succeeds.
        write_tool(
            fake_bin,
            "docker",
            _ARGV_RECORDER.replace(
                'sys.exit(int(os.environ.get("FAKE_EXIT", "0")))',
                'sys.exit(1 if sys.argv[1:3] == ["manifest", "inspect"] else 0)',
            ),
        )
        # git clone must leave a MaxText-like tree behind.
        write_tool(
            fake_bin,
            "git",
            _ARGV_RECORDER.replace(
                'sys.exit(int(os.environ.get("FAKE_EXIT", "0")))',
                'd = sys.argv[-1]; os.makedirs(d + "/src/dependencies/scripts", exist_ok=True); '
                'open(d + "/src/dependencies/scripts/docker_build_dependency_image.sh", "w").write('
                '"echo \\"$@\\" > deps_args.txt\\n"); sys.exit(0)',
            ),
        )
    proc = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in record.read_text().splitlines()]


@pytest.mark.unit
def test_setup_script_skips_the_build_when_the_image_exists(tmp_path: Path, fake_bin: Path) -> None:
    calls = _run_setup(plan_for(RECIPES["classic"]), tmp_path, fake_bin, image_exists=True)
    assert calls[0][:4] == ["gcloud", "container", "clusters", "get-credentials"]
    assert calls[1] == ["docker", "manifest", "inspect", "gcr.io/demo-project/maxtext-runner"]
    assert len(calls) == 2


@pytest.mark.unit
def test_setup_script_builds_and_pushes_when_the_image_is_missing(
    tmp_path: Path, fake_bin: Path
) -> None:
    calls = _run_setup(plan_for(RECIPES["classic"]), tmp_path, fake_bin, image_exists=False)
    tools = [c[0] + " " + c[1] for c in calls]
    assert tools == [
        "gcloud container",
        "docker manifest",
        "gcloud auth",
        "git clone",
        "docker build",
        "docker push",
    ]
    clone = calls[3]
    assert clone[clone.index("--branch") + 1] == "main"
    assert calls[-1] == ["docker", "push", "gcr.io/demo-project/maxtext-runner"]


@pytest.mark.unit
def test_environment_is_not_leaked_into_scripts() -> None:
    os.environ["HF_TOKEN"] = "hf_secret_value_for_test"
    try:
        text = render_submit(plan_for(RECIPES["classic"])) + render_setup(
            plan_for(RECIPES["classic"])
        )
    finally:
        del os.environ["HF_TOKEN"]
    assert "hf_secret_value_for_test" not in text
