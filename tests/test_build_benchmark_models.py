"""tools/build_benchmark_models.py: MaxText's benchmark configurations read with ``ast``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _tool(name: str) -> ModuleType:
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


FLAGS = """
_LIMIT = 98304
LIMIT_FLAG = f" --xla_tpu_scoped_vmem_limit_kib={_LIMIT}"
CUSTOM_LIMIT = "--xla_tpu_scoped_vmem_limit_kib={vmem_limit}".format
OLD_CUSTOM = lambda vmem_limit: f"--xla_old_limit={vmem_limit}"
CF = (
    " --xla_a=true"
    " --xla_b=true"
)
DEBUG = False
if DEBUG:
  CF = ""
"""

CONFIGS = """
import os.path
from tempfile import gettempdir
from benchmarks import xla_flags_library
from benchmarks.globals import MAXTEXT_ASSETS_ROOT

trillium_model_dict = {}
BASE = {"enable_checkpointing": False}

tiny = _add_to_model_dictionary(
    trillium_model_dict,
    MaxTextModel(
        model_name="tiny-8b-4096",
        model_type="llama3.1-8b",
        tuning_params={
            "per_device_batch_size": 2,
            **BASE,
            "tokenizer_path": os.path.join(MAXTEXT_ASSETS_ROOT, "tokenizer.llama2"),
            "grain_train_files": os.path.join(gettempdir(), "c4*"),
        },
        xla_flags=(
            xla_flags_library.LIMIT_FLAG
            + xla_flags_library.CF
            + xla_flags_library.CUSTOM_LIMIT(vmem_limit=1024)
            + " " + xla_flags_library.OLD_CUSTOM(5)
        ),
    ),
)
"""


def test_models_are_evaluated_with_flags_and_helpers_resolved() -> None:
    ev = _tool("benchmark_source_eval")
    build = _tool("build_benchmark_models")
    flags = ev.evaluate(FLAGS, "xla_flags_library.py", {}, {})
    ns = ev.evaluate(CONFIGS, "configs.py", {"xla_flags_library": flags}, build.GLOBALS)
    models = ev.models_of(ns, "trillium_model_dict")
    assert list(models) == ["tiny_8b_4096"]
    entry = build.model_entry(models["tiny_8b_4096"], "trillium")
    assert entry["model_type"] == "llama3.1-8b"
    assert entry["tuning_params"] == {
        "per_device_batch_size": "2",
        "enable_checkpointing": "False",
        "tokenizer_path": "MaxText/assets/tokenizer.llama2",
        "grain_train_files": "/tmp/c4*",
    }
    # strings are joined as Python joins them: the helper's flag has no leading space
    assert entry["xla_flags"] == (
        "--xla_tpu_scoped_vmem_limit_kib=98304 --xla_a=true --xla_b=true"
        "--xla_tpu_scoped_vmem_limit_kib=1024 --xla_old_limit=5"
    )


def test_older_modules_without_a_registry_give_their_module_level_models() -> None:
    ev = _tool("benchmark_source_eval")
    text = 'gpt_3_175b = MaxTextModel(model_name="gpt-3-175b", model_type="gpt3-175b", tuning_params={}, xla_flags="")\n'
    ns = ev.evaluate(text, "old.py", {}, {})
    assert list(ev.models_of(ns, "trillium_model_dict")) == ["gpt_3_175b"]


def test_an_unsupported_construct_names_the_line() -> None:
    ev = _tool("benchmark_source_eval")
    with pytest.raises(ev.UnsupportedSourceError, match=r"x\.py:2: unsupported statement"):
        ev.evaluate("A = 1\nfor i in []: pass\n", "x.py", {}, {})


RUNNER = """
def build_user_command(name, wl_config):
  jax_platforms = None
  vertex_tensorboard = ""
  if is_pw_enabled:
    jax_platforms = "proxy"
  else:
    jax_platforms = "tpu,cpu"
    vertex_tensorboard = 'use_vertex_tensorboard=false vertex_tensorboard_project=""'
  libtpu_flags = f"LIBTPU_INIT_ARGS='{wl_config.model.xla_flags}'"
  enable_metrics_cmd = ""
  if wl_config.generate_metrics_and_upload_to_big_query:
    enable_metrics_cmd = "gcs_metrics=true"
  command = " ".join([
      f"{install_libtpu_cmd}",
      f"echo {libtpu_flags} &&",
      f"export {libtpu_flags} &&" if not is_pw_enabled else "",
      f"export JAX_PLATFORMS={jax_platforms} &&",
      f'python3 -m MaxText.train {os.path.join("MaxText", "configs", "base.yml")}',
      f"{config_tuning_params}",
      f"steps={wl_config.num_steps}",
      f"model_name={wl_config.model.model_type}",
      f"base_output_directory={wl_config.base_output_directory}",
      f"{vertex_tensorboard}",
      f"{run_name_command}",
      f"{enable_metrics_cmd}",
  ])
  return command
"""


def test_the_pod_command_of_a_plain_xpk_run() -> None:
    build = _tool("build_benchmark_models")
    command = build.pod_command(RUNNER, {"libtpu_type": "maxtext-docker"})
    assert command["env"] == [["LIBTPU_INIT_ARGS", "{xla_flags}"], ["JAX_PLATFORMS", "tpu,cpu"]]
    assert command["entry"] == ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml"]
    assert command["args"] == [
        "{tuning_params}",
        "steps={steps}",
        "model_name={model_type}",
        "base_output_directory={base_output_directory}",
        "use_vertex_tensorboard=false",
        "vertex_tensorboard_project=",
        "run_name={run_name}",
    ]
    assert command["libtpu_install"] == ""


def test_bash_hands_the_runner_what_the_reader_reads(tmp_path: Path) -> None:
    verify = _tool("verify_runner_with_bash")
    root = Path(__file__).resolve().parent / "fixtures" / "recipes"
    found = verify.runner_recipes(root)
    assert len(found) == 6
    bin_dir = verify.make_bin(tmp_path, sys.executable)
    bash = "/bin/bash"
    for n, path in enumerate(found):
        work = tmp_path / f"w{n}"
        work.mkdir()
        ok, line = verify.check_runner_recipe(path, path.name, bash, bin_dir, work, 30)
        assert ok, line
        assert "reads as" in line


def test_a_reading_that_differs_from_bash_is_reported(tmp_path: Path) -> None:
    verify = _tool("verify_runner_with_bash")
    script = tmp_path / "x.sh"
    # bash splits the unquoted value; the reader keeps words as written, so the two differ
    script.write_text(
        "M='a b'\npython3 -m benchmarks.benchmark_runner xpk --model_name=$M --zone=z\n"
    )
    work = tmp_path / "w"
    work.mkdir()
    bin_dir = verify.make_bin(tmp_path, sys.executable)
    ok, line = verify.check_runner_recipe(script, "x.sh", "/bin/bash", bin_dir, work, 30)
    assert not ok
    assert line.startswith("MISMATCH x.sh")
