"""The recipe reader on fixture recipes of each variant family, and on bad input."""

from __future__ import annotations

import pytest

from conftest import IRONWOOD, RECIPES, RECIPES_ROOT
from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.reader import parse_recipe
from tpu_trainer.recipes.recipe import Framework, Recipe, StepKind

pytestmark = pytest.mark.unit


def read(kind: str) -> Recipe:
    path = RECIPES_ROOT / RECIPES[kind] / "run_recipe.sh"
    return parse_recipe(path.read_text(), str(path))


def test_reader_classic_recipe_extracts_flags_args_and_xpk_flags_in_order() -> None:
    r = read("classic")
    assert r.xla_flags == (
        "--xla_tpu_scoped_vmem_limit_kib=65536",
        "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=false",
        "--xla_enable_async_all_gather=true",
    )
    assert r.program_args == (
        "model_name=llama3.1-8b",
        "per_device_batch_size=2",
        "max_target_length=8192",
        "ici_fsdp_parallelism=-1",
        "remat_policy=full",
        "dataset_type=synthetic",
        "enable_checkpointing=False",
        "steps=20",
        "base_output_directory=${BASE_OUTPUT_DIR}",
        "run_name=${WORKLOAD_NAME}",
    )
    assert [(f.name, f.value) for f in r.xpk_flags if f.name != "--command"] == [
        ("--cluster", "${CLUSTER_NAME}"),
        ("--project", "${PROJECT_ID}"),
        ("--zone", "${ZONE}"),
        ("--priority", "very-high"),
        ("--max-restarts", "0"),
        ("--device-type", "tpu7x-2x2x1"),
        ("--num-slices", "1"),
        ("--docker-image", "${WORKLOAD_IMAGE}"),
        ("--enable-debug-logs", None),
        ("--workload", "${WORKLOAD_NAME}"),
    ]
    assert r.entry.module == "MaxText.train"
    assert r.entry.base_config == "MaxText/configs/base.yml"
    assert r.framework is Framework.MAXTEXT
    assert r.device_type == "tpu7x-2x2x1"


def test_reader_classic_recipe_lists_variables_the_user_must_fill() -> None:
    r = read("classic")
    assert [v.name for v in r.variables if v.must_fill] == [
        "PROJECT_ID",
        "CLUSTER_NAME",
        "ZONE",
        "BASE_OUTPUT_DIR",
        "WORKLOAD_IMAGE",
    ]
    name = r.variable("WORKLOAD_NAME")
    assert name is not None and name.computed and not name.must_fill


def test_reader_tee_upload_recipe_keeps_quoted_values_whole_and_finds_the_chain() -> None:
    r = read("tee-upload")
    assert "weight_quantization_calibration_method=fixed,-224,224" in r.program_args
    assert [s.kind for s in r.steps][-3:] == [StepKind.ENTRY, StepKind.TEE, StepKind.UPLOAD]
    assert r.steps[-3].separator == "|"
    assert (
        r.steps[-1].text() == "gsutil cp train.log ${ARTIFACT_DIR}/logs/train-${TPU_WORKER_ID}.log"
    )
    assert r.shell_options == ("-e", "-o pipefail")
    assert [(p.name, p.line) for p in r.placeholders] == [("your-gcs-bucket-path", 34)]
    assert r.xpk_flag("--priority") == "medium"


def test_reader_storage_recipe_reads_tpu_type_base_image_storage_and_setup_steps() -> None:
    r = read("storage")
    assert r.xpk_flag("--tpu-type") == "tpu7x-4x8x8"
    assert r.has_xpk_flag("--base-docker-image") and not r.has_xpk_flag("--docker-image")
    assert r.xpk_flag("--storage") == "${DATASET_VOLUME_NAME}"
    assert [s.text() for s in r.steps if s.kind is StepKind.SETUP] == [
        "cd /app",
        "pip install --no-deps -e .",
    ]
    assert r.entry.module == "src.maxtext.trainers.pre_train.train"
    assert "grain_train_files=${DATASET_MOUNT}/c4/3.0.1/*.arrayrecord" in r.program_args
    mount = r.variable("DATASET_MOUNT")
    assert mount is not None and mount.template == "/tmp/dataset" and not mount.must_fill


def test_reader_maxdiffusion_recipe_joins_inline_and_variable_args_in_order() -> None:
    r = read("maxdiffusion")
    assert r.framework is Framework.MAXDIFFUSION
    assert r.args_variable == "MAXDIFFUSION_ARGS"
    assert r.entry.env == (("HF_HUB_CACHE", "/dev/shm"),)
    assert r.program_args[:3] == (
        "output_dir=${BASE_OUTPUT_DIR}",
        "train_data_dir=${DATASET_DIR}",
        "model_name=wan2.1",
    )
    assert (
        "prompt=a red fox running through fresh snow at dawn, cinematic lighting" in r.program_args
    )


def _recipe(body: str) -> str:
    return (
        'export PROJECT_ID=""\n'
        'XLA_FLAGS=" --xla_a=1 "\n'
        f"{body}\n"
        "xpk workload create --cluster=$CLUSTER_NAME --device-type=tpu7x-2x2x1 \\\n"
        "  --workload=w --command=\"export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && "
        'python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}"\n'
    )


@pytest.mark.parametrize(
    ("body", "needle", "line"),
    [
        (
            'MAXTEXT_ARGS="steps=$(cat steps.txt) model_name=x"',
            "command substitution in MAXTEXT_ARGS",
            3,
        ),
        ('MAXTEXT_ARGS="steps=`cat steps.txt`"', "backquote", 3),
        ("for i in 1 2; do echo $i; done", "a `for` loop is read only when", 3),
        ('MAXTEXT_ARGS="steps=$((1+2))"', "arithmetic expansion", 3),
        ('MAXTEXT_ARGS="steps=${STEPS:-5}"', "unsupported parameter expansion", 3),
        ("gsutil cp gs://bucket/x .", "unsupported command `gsutil`", 3),
    ],
)
def test_reader_rejects_unsupported_constructs_naming_the_line(
    body: str, needle: str, line: int
) -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe(_recipe(body), "bad.sh")
    assert needle in info.value.message
    assert f"bad.sh:{line}:" in info.value.message
    assert info.value.fix


def test_reader_without_xpk_command_says_it_is_not_a_recipe() -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe('export A=""\necho hi\n', "x.sh")
    assert "no `xpk workload create`" in info.value.message


def test_reader_without_python_entry_is_rejected() -> None:
    text = 'xpk workload create --device-type=tpu7x-2x2x1 --command="echo hi"\n'
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, "x.sh")
    assert "python3 -m" in info.value.message


def test_reader_other_xpk_subcommand_is_rejected() -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe("xpk cluster create --cluster=c\n", "x.sh")
    assert "xpk cluster create" in info.value.message


def test_reader_never_runs_the_script() -> None:
    marker = IRONWOOD / "never-created-by-reader"
    text = _recipe('MAXTEXT_ARGS="steps=1"').replace(
        'export PROJECT_ID=""', f'export PROJECT_ID=""\ntouch {marker}'
    )
    with pytest.raises(RecipeError):
        parse_recipe(text, "x.sh")
    assert not marker.exists()
