"""The packaged data files (TPU kinds, MaxText's key tables, scale-down rules, compile targets,
memory-estimate constants): they load, and a malformed one names its file and key."""

from __future__ import annotations

import pytest

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import DataFileError
from tpu_trainer.catalog.tpu_kinds import load_tpu_kinds, tpu_kinds
from tpu_trainer.frameworks.maxtext.compile_targets import compile_table, load_compile_targets
from tpu_trainer.frameworks.maxtext.memory_tables import load_memory_tables, memory_tables
from tpu_trainer.frameworks.maxtext.mesh_axes import MeshAxisName, setting_key
from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.frameworks.maxtext.pyconfig_keys import load_pyconfig_keys, pyconfig_keys
from tpu_trainer.frameworks.maxtext.scale_down_rules import (
    load_scale_down_rules,
    scale_down_rules,
)

pytestmark = pytest.mark.unit


def test_packaged_files_load() -> None:
    assert tpu_kinds()[Family.V7].libtpu_prefix == "tpu7x"
    assert Family.CPU not in tpu_kinds()
    assert compile_table().targets[Family.V5P].platform == "v5"
    assert "steps" in compile_table().not_compiled
    assert pyconfig_keys().renames["lr"].targets == ("learning_rate",)
    assert scale_down_rules().cpu_attention == "dot_product"
    tables = memory_tables()
    assert tables.dtype_bytes["bfloat16"] == 2
    assert len(tables.calibration) >= 3


@pytest.mark.parametrize(
    ("load", "text", "named"),
    [
        (load_tpu_kinds, "tpu_kinds: {v7: {device_kind: TPU7x, libtpu_prefix: ''}}", "v7"),
        (load_tpu_kinds, "tpu_kinds: {v9: {}}", "tpu_kinds.v9"),
        (load_compile_targets, "compile_targets: {v4: {prefix: v4}}", "compile_targets.v4"),
        (load_pyconfig_keys, "derived: {}\nnested: {}\nrenames: {lr: {note: x}}", "renames.lr"),
        (load_scale_down_rules, "attention_periods: {gemma3: 0}", "gemma3"),
        (load_memory_tables, "dtype_bytes: {float32: four}", "float32"),
        (load_tpu_kinds, "tpu_kinds: [", "not valid YAML"),
    ],
)
def test_a_malformed_file_names_file_and_key(load: object, text: str, named: str) -> None:
    with pytest.raises(DataFileError) as raised:
        load(text, "table.yaml")  # type: ignore[operator]
    assert str(raised.value).startswith("table.yaml: ")
    assert named in str(raised.value)


def test_mesh_axis_names_and_their_settings() -> None:
    assert MeshAxisName("fsdp") is MeshAxisName.FSDP
    assert setting_key(MeshAxisName.STAGE, "ici") == "ici_pipeline_parallelism"
    assert setting_key("model", "dcn") == "dcn_tensor_parallelism"
    assert setting_key("attn_dp", "ici") is None


def test_model_shape_applies_the_parameter_scale_and_needs_the_base_sizes() -> None:
    base = {
        "base_emb_dim": 256,
        "base_mlp_dim": 512,
        "base_num_decoder_layers": 2,
        "base_num_query_heads": 4,
        "base_num_kv_heads": 4,
        "decoder_block": "gemma2",
    }
    shape = ModelShape.from_config({**base, "global_parameter_scale": 8})
    assert (shape.emb, shape.heads, shape.mlp, shape.layers) == (512, 8, 1024, 4)
    assert shape.blocks == 8  # a Gemma 2 layer holds two blocks
    assert ModelShape.configured({**base, "global_parameter_scale": 8}).emb == 256
    with pytest.raises(KeyError):
        ModelShape.from_config({"model_name": "default"})
