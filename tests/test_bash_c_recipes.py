"""Trillium Cluster Toolkit recipes whose pod command is one ``bash -c '...'`` script: read through
the wrapper (the pod already runs the command with bash), an ``if``/``else`` choosing the
training entry point by the image's MaxText layout, the script's own variable check (a ``for``
loop with ``${!var}``) and a workload name built by a command substitution; the submit script
runs under bash, and the pod command it hands gcluster runs under bash in both branches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, GOLDEN, NOW, RECIPES_ROOT, at_recipes_root, check_golden, write_tool
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.infra.gcluster_flags import check_gcluster_argv
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.plan.scripts import render_submit, submitted_argv
from tpu_trainer.recipes.cluster_toolkit import parse_cluster_toolkit_recipe
from tpu_trainer.recipes.pod_steps import entry_point
from tpu_trainer.recipes.recipe import StepKind

pytestmark = pytest.mark.unit

RECIPE = "training/trillium/Mistral-7B-MaxText"
SCRIPT = RECIPES_ROOT / RECIPE / "cluster_toolkit" / "run_recipe.sh"
_RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["RECORD_FILE"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""
_PYTHON = """#!/bin/sh
printf '%s\\n' "$@" > "$ARGS_FILE"
printf '%s' "$LIBTPU_INIT_ARGS" > "$ARGS_FILE.xla"
echo "completed step: 1"
exit 7
"""


def _plan() -> Plan:
    with at_recipes_root():
        return plan_request(Request(RECIPE, config_path=CONFIG), PlanOptions(user="u", now=NOW))


def test_the_script_after_bash_c_is_read_as_the_pod_command() -> None:
    recipe = parse_cluster_toolkit_recipe(SCRIPT.read_text(), str(SCRIPT))
    entries = [entry_point(s.words) for s in recipe.steps if s.kind is StepKind.ENTRY]
    assert [(e.lead, e.module, e.base_config) for e in entries] == [
        (("then",), "MaxText/train.py", "MaxText/configs/base.yml"),
        (("else",), "maxtext.trainers.pre_train.train", "maxtext/configs/base.yml"),
    ]
    assert all(e.options == ("-u",) and e.redirects == ("2>&1",) for e in entries)
    assert recipe.entry == entries[-1]  # what current MaxText images run
    assert recipe.program_args[0] == "model_name=mistral-7b"
    assert recipe.program_args[-1] == "run_name=${WORKLOAD_NAME}"
    assert "2>&1" not in recipe.program_args
    assert recipe.xla_flags[0] == "--xla_tpu_scoped_vmem_limit_kib=98304"
    assert recipe.device_type == "v6e-2x4"
    kinds = [s.kind for s in recipe.steps]
    assert kinds.count(StepKind.UPLOAD) == 2 and kinds.count(StepKind.TEE) == 2
    name = recipe.variable("WORKLOAD_NAME")
    assert name is not None and name.computed  # ${SHORT_USER}-...-$(date): the tool's own
    project = recipe.variable("PROJECT_ID")
    assert project is not None and project.must_fill


def test_the_plan_names_the_model_folder_and_reads_the_slice() -> None:
    plan = _plan()
    assert plan.model == "Mistral-7B-MaxText"
    assert (plan.slice.device_type, plan.slice.hosts) == ("v6e-2x4", 2)
    assert not [f for f in plan.findings if f.status.value == "fail"]


def test_submit_script_matches_golden(update_golden: bool) -> None:
    text = render_submit(_plan())
    check_golden(GOLDEN / "gcluster" / "submit-bash-c.sh", text, update_golden)
    assert "bash -c" not in text  # the pod's own bash runs the script


def _submit(tmp_path: Path) -> tuple[Plan, str]:
    plan = _plan()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_tool(bin_dir, "gcluster", _RECORDER)
    write_tool(bin_dir, "date", "#!/bin/sh\necho 20261122-0600\n")
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(plan))
    record = tmp_path / "calls.jsonl"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_FILE": str(record)}
    proc = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    [call] = [json.loads(x) for x in record.read_text().splitlines()]
    assert ["gcluster", *call] == submitted_argv(plan)
    verdict = check_gcluster_argv(["gcluster", *call])
    assert verdict.ok, verdict.problems
    command = next(a for a in call if a.startswith("--command="))
    return plan, command.removeprefix("--command=")


@pytest.mark.parametrize("layout", ["MaxText/train.py", "maxtext"])
def test_the_pod_command_runs_the_branch_the_image_has_and_keeps_its_exit_code(
    tmp_path: Path, layout: str
) -> None:
    plan, command = _submit(tmp_path)
    pod = tmp_path / "pod"
    (pod / "MaxText").mkdir(parents=True)
    if layout == "MaxText/train.py":
        (pod / "MaxText" / "train.py").touch()
    bin_dir = tmp_path / "pod-bin"
    bin_dir.mkdir()
    write_tool(bin_dir, "python3", _PYTHON)
    write_tool(bin_dir, "gcloud", "#!/bin/sh\nexit 0\n")
    args_file = tmp_path / "args.txt"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGS_FILE": str(args_file)}
    proc = subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=pod,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 7, proc.stderr  # the program's, through `| tee` and PIPESTATUS
    got = args_file.read_text().splitlines()
    entry = (
        ["MaxText/train.py"]
        if layout == "MaxText/train.py"
        else ["-m", "maxtext.trainers.pre_train.train"]
    )
    assert got[: len(entry) + 1] == ["-u", *entry]
    assert got[len(entry) + 2 :] == [plan.expand(a) for a in plan.program_arg_texts]
    assert Path(f"{args_file}.xla").read_text().split() == list(plan.xla_flags)
    assert (pod / "train.log").read_text().startswith("completed step: 1")
