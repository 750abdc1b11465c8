"""Cluster Toolkit recipes (``cluster_toolkit/run_recipe.sh``, ``gcluster job submit``): the
reader, the choice of variant by submitter, and their plans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, IRONWOOD, NOW, RECIPES_ROOT, at_recipes_root
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.config.model import config_from_mapping
from tpu_trainer.errors import ConfigError, InputError, RecipeError
from tpu_trainer.plan.naming import GCLUSTER_NAME_MAX
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.recipes.cluster_toolkit import (
    looks_like_cluster_toolkit,
    parse_cluster_toolkit_recipe,
)
from tpu_trainer.recipes.read import read_recipe
from tpu_trainer.recipes.recipe import StepKind, gcluster_device_type
from tpu_trainer.recipes.resolve import Filters, recipes_under, resolve

pytestmark = pytest.mark.unit

BOTH = IRONWOOD / "gemmoe-26b" / "4k-bf16-tpu7x-4x4x4"
"""A recipe folder holding xpk/ and cluster_toolkit/."""
GCS = IRONWOOD / "densemoe-671b" / "4k-bf16-tpu7x-4x8x8-gcs"
"""A recipe folder holding cluster_toolkit/ only (a GCS FUSE mount, an image gcluster builds)."""
TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    """``tools/verify_recipes_with_bash.py`` run on ``args``."""
    tool = str(TOOLS / "verify_recipes_with_bash.py")
    return subprocess.run(
        [sys.executable, tool, *args], capture_output=True, text=True, timeout=300, check=False
    )


def _read(folder: Path) -> str:
    return (folder / "cluster_toolkit" / "run_recipe.sh").read_text(encoding="utf-8")


def test_reads_the_gcluster_submission_like_an_xpk_one() -> None:
    recipe = parse_cluster_toolkit_recipe(_read(BOTH), "ct.sh")
    assert recipe.submitter == "gcluster"
    assert recipe.device_type == "tpu7x-4x4x4"
    assert recipe.num_slices == 1
    assert recipe.xpk_flag("--location") == "${ZONE}"
    assert recipe.xpk_flag("--name") == "${WORKLOAD_NAME}"
    assert recipe.xpk_flag("--image") == "${WORKLOAD_IMAGE}"
    assert recipe.xpk_flag("--priority") == "medium"
    assert recipe.xpk_flag("--restarts") == "0"
    assert recipe.xpk_flag("--queue") == "multislice-queue"
    assert recipe.xpk_flag("--gke-namespace") == "default"
    assert recipe.has_xpk_flag("--skip-prereqs") and recipe.xpk_flag("--skip-prereqs") is None
    assert recipe.xla_flags[0] == "--xla_tpu_scoped_vmem_limit_kib=65536"
    assert recipe.entry.module == "maxtext.trainers.pre_train.train"
    assert recipe.entry.options == ("-u",)  # unbuffered output, kept in the submit script
    assert recipe.program_args[-1] == "run_name=${WORKLOAD_NAME}"
    assert recipe.dry_run == ("--dry-run", "--dry-run-out=*", "--dry-run-out")
    names = [v.name for v in recipe.variables]
    assert "PATH" not in names  # the gcluster bundle's PATH is this machine's business
    workload = recipe.variable("WORKLOAD_NAME")
    assert workload is not None and workload.computed


def test_a_dry_run_loop_whose_array_gcluster_never_gets_is_no_dry_run() -> None:
    text = _read(BOTH).replace('  "${DRY_RUN_ARG[@]}" \\\n', "")
    assert '"${DRY_RUN_ARG[@]}"' not in text
    assert parse_cluster_toolkit_recipe(text, "ct.sh").dry_run == ()


def test_the_per_worker_log_upload_is_an_upload_step() -> None:
    recipe = parse_cluster_toolkit_recipe(_read(BOTH), "ct.sh")
    uploads = [s for s in recipe.steps if s.kind is StepKind.UPLOAD]
    assert len(uploads) == 1
    assert "gcloud storage cp" in uploads[0].text()
    assert "${ARTIFACT_DIR}/logs/train-${TPU_WORKER_ID:-" in uploads[0].text()
    assert [s.kind for s in recipe.steps].count(StepKind.TEE) == 1


def test_mount_build_context_and_defaults() -> None:
    recipe = parse_cluster_toolkit_recipe(_read(GCS), "ct.sh")
    assert recipe.device_type == "tpu7x-4x8x8"
    assert recipe.num_slices == 2
    assert recipe.xpk_flag("--base-image") == "${WORKLOAD_IMAGE}"
    assert recipe.xpk_flag("--build-context") == "."
    mount = recipe.xpk_flag("--mount")
    assert mount == (
        "gs://${DATASET_BUCKET};${DATASET_BUCKET_MOUNTED_PATH};ro;"
        "options=implicit-dirs,metadata-cache:ttl-secs:-1"
    )
    artifact = recipe.variable("ARTIFACT_DIR")
    assert artifact is not None and artifact.template == "${BASE_OUTPUT_DIR}/${WORKLOAD_NAME}"
    assert recipe.dry_run == ()
    assert (
        recipe.arg_value("grain_train_files") == "${DATASET_BUCKET_MOUNTED_PATH}/c4/*.arrayrecord"
    )


@pytest.mark.parametrize(
    ("compute", "topology", "device"),
    [
        ("tpu7x", "4x4x4", "tpu7x-4x4x4"),
        ("ct6e-standard-4t", "4x4", "v6e-4x4"),
        ("tpu7x-standard-4t", "2x2x1", "tpu7x-2x2x1"),
        ("v6e-16", None, "v6e-16"),
    ],
)
def test_the_slice_is_compute_type_with_topology(
    compute: str, topology: str | None, device: str
) -> None:
    assert gcluster_device_type(compute, topology) == device


def test_read_recipe_picks_the_reader_by_what_the_script_runs() -> None:
    with at_recipes_root():
        ref = resolve(str(BOTH), None, Filters(submitter="gcluster"))
        assert read_recipe(ref).submitter == "gcluster"
        ref = resolve(str(BOTH), None, Filters())
        assert read_recipe(ref).submitter == "xpk"
    assert looks_like_cluster_toolkit('"${GCLUSTER_BIN}" job submit --name x')
    assert not looks_like_cluster_toolkit("xpk workload create --workload x")


_SUBMIT = (
    'gcluster job submit --compute-type tpu7x --topology 2x2x1 --name n \\\n  --command "python3 -m '
    'MaxText.train MaxText/configs/base.yml steps=1"\n'
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_SUBMIT + _SUBMIT, "a second `gcluster job submit`"),
        ("gcluster job list\n", "`gcluster job list` is not supported"),
        (_SUBMIT.replace("--compute-type tpu7x ", ""), "has no --compute-type"),
        ("echo hi\n", "no `gcluster job submit` command found"),
        ("xpk workload create --device-type=tpu7x-8\n" + _SUBMIT, "`xpk` in a Cluster Toolkit"),
        ("X=$(id)\n" + _SUBMIT.replace("steps=1", "steps=${X}"), "command substitution in X"),
        ('X="${!Y}"\n' + _SUBMIT.replace("steps=1", "steps=${X}"), "indirect expansion ${!Y}"),
        ("for v in A B; do echo $v; done\n" + _SUBMIT, "a `for` loop is read only when"),
        (_SUBMIT + "for v in A B; do\n  if [[ -z ${!v} ]]; then exit 1; fi\n", "without `done`"),
        (
            _SUBMIT.replace('"python3', '"bash -c \\"python3').replace('=1"', '=\\$HOME\\""'),
            "`bash -c` script whose references",
        ),
        (_SUBMIT.replace("=1", "=1 > out.txt"), "output is redirected to a file"),
    ],
)
def test_refusals_say_what_to_do(text: str, message: str) -> None:
    with pytest.raises(RecipeError) as caught:
        parse_cluster_toolkit_recipe(text, "ct.sh")
    assert message in str(caught.value)
    assert caught.value.fix


def test_a_folder_with_both_variants_reads_xpk_unless_asked() -> None:
    assert resolve(str(BOTH), None, Filters()).script.parent.name == "xpk"
    chosen = resolve(str(BOTH), None, Filters(submitter="gcluster"))
    assert chosen.script.parent.name == "cluster_toolkit"
    assert chosen.config_dir == BOTH and chosen.model == "gemmoe-26b"
    assert chosen.parsed is not None and chosen.parsed.topology == "4x4x4"


def test_a_folder_with_one_variant_reads_it_and_refuses_the_other() -> None:
    assert resolve(str(GCS), None, Filters()).script.parent.name == "cluster_toolkit"
    with pytest.raises(InputError) as caught:
        resolve(str(GCS), None, Filters(submitter="xpk"))
    assert "has no xpk variant (xpk/run_recipe.sh); it has: gcluster" in str(caught.value)
    assert "--submitter gcluster" in caught.value.fix


def test_an_unknown_submitter_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        resolve(str(BOTH), None, Filters(submitter="kubectl"))
    assert "unknown submitter 'kubectl'" in str(caught.value)
    assert caught.value.fix == "use one of: xpk, gcluster"


def test_model_lookup_lists_one_variant_per_folder() -> None:
    folders = [r.script.parent for r in recipes_under(IRONWOOD) if r.model == "gemmoe-26b"]
    assert [f.name for f in folders] == ["xpk"]
    asked = [r.script.parent.name for r in recipes_under(IRONWOOD, "gcluster")]
    # folders with xpk/ only are left out; a script without a variant level stays
    assert asked == ["cluster_toolkit", "cluster_toolkit", "4k-fp8-tpu7x-4x4x4"]
    ref = resolve("gemmoe-26b", RECIPES_ROOT, Filters(submitter="gcluster"))
    assert ref.script.parent.name == "cluster_toolkit"


def test_the_configuration_key_takes_xpk_or_gcluster() -> None:
    base = {"submitter": "gcluster"}
    assert config_from_mapping(base, "c.yaml", require=False).submitter == "gcluster"
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"submitter": "kubectl"}, "c.yaml", require=False)
    assert "submitter" in str(caught.value)


def test_the_configuration_submitter_is_the_default(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.read_text(encoding="utf-8") + "submitter: gcluster\n")
    options = PlanOptions(user="test_user", now=NOW)
    plan = plan_request(Request(str(BOTH), config_path=config), options)
    assert plan.recipe.submitter == "gcluster"
    cli = plan_request(Request(str(BOTH), Filters(submitter="xpk"), config_path=config), options)
    assert cli.recipe.submitter == "xpk"


def test_plan_of_a_gcluster_recipe() -> None:
    options = PlanOptions(user="a-rather-long-user-name", now=NOW)
    plan = plan_request(
        Request(str(BOTH), Filters(submitter="gcluster"), config_path=CONFIG), options
    )
    assert len(plan.workload_name) <= GCLUSTER_NAME_MAX
    assert plan.workload_name == "a-rather-long-20261122-0600"
    argv = plan.xpk_argv("true")
    assert argv[:3] == ["gcluster", "job", "submit"]
    assert "--location=us-central1-ai1a" in argv
    assert f"--name={plan.workload_name}" in argv
    assert "--image=gcr.io/demo-project/maxtext-runner" in argv
    assert not any(a.startswith(("--zone", "--workload", "--max-restarts")) for a in argv)


def test_bash_hands_gcluster_what_the_reader_reads() -> None:
    done = _verify("--fill-exports", str(IRONWOOD))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK gemmoe-26b/4k-bf16-tpu7x-4x4x4/cluster_toolkit/run_recipe.sh" in done.stdout
    assert "3 dry-run forms" in done.stdout
    assert "OK densemoe-671b/4k-bf16-tpu7x-4x8x8-gcs/cluster_toolkit/run_recipe.sh" in done.stdout


def test_bash_check_catches_a_dry_run_loop_that_drops_the_file(tmp_path: Path) -> None:
    broken = _read(BOTH).replace(
        'DRY_RUN_ARG=("--dry-run-out" "$2")', 'DRY_RUN_ARG=("--dry-run-out")'
    )
    assert broken != _read(BOTH)
    script = tmp_path / "model" / "4k-bf16-tpu7x-4x4x4" / "cluster_toolkit" / "run_recipe.sh"
    script.parent.mkdir(parents=True)
    script.write_text(broken, encoding="utf-8")
    done = _verify(str(tmp_path))
    assert done.returncode == 1
    assert "MISMATCH" in done.stdout
    assert "with --dry-run-out manifest.yaml: gcluster's flags changed by" in done.stdout
