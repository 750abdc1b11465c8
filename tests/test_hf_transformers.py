"""Hugging Face Transformers: log dicts (5.x strings, 4.x numbers, tqdm noise, the summary) read
into step records; the generated training script (golden, compiles, settings as literals, no
secret, Transformers 5.23's real argument names); the TPU VM program; and one real CPU run of
the script in the cached HF runtime, read into metrics and stored like any run."""

from __future__ import annotations

import ast
import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from conftest import GOLDEN, check_golden
from tpu_trainer.app.results import store_metrics
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.hf.log import (
    StepTime,
    log_dicts,
    number,
    parse_step,
    read_hf_log,
    read_log,
)
from tpu_trainer.frameworks.hf.program import HfSettings, hf_program, render_train_script
from tpu_trainer.frameworks.hf.runtime import install_hf
from tpu_trainer.frameworks.hf.train_script import SCRIPT_NAME
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.metrics.summary import summarize
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.db import RunStatus, RunStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hf"
HF_TOKEN = "hf_" + "Wk4" * 11  # made up, shaped like a real one


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").split("\n")


# ---- the log ---------------------------------------------------------------------------------
@pytest.mark.unit
def test_transformers5_string_values_behind_tqdm_give_steps_in_order_and_the_summary() -> None:
    log = read_hf_log(_lines("transformers5_tqdm.log"))
    steps = log.parsed.steps
    assert [s.step for s in steps] == list(range(8))  # the eval dict is not a step
    assert steps[0].loss == pytest.approx(5.564)
    assert steps[-1].loss == pytest.approx(4.431)
    assert steps[0].extra == {"grad_norm": 1.25, "learning_rate": 0.0007, "epoch": 0.125}
    summary = log.summary
    assert summary is not None
    assert (summary.runtime_seconds, summary.loss, summary.epoch) == (16.4, 4.886, 1.0)
    assert summary.samples_per_second == pytest.approx(15.61)
    assert summary.steps_per_second == pytest.approx(0.4878)
    # no step_seconds in plain Transformers output: train_runtime / steps for each step
    assert log.step_time is StepTime.AVERAGE
    assert [s.seconds for s in steps] == [pytest.approx(16.4 / 8)] * 8


@pytest.mark.unit
def test_transformers4_numbers_with_logging_every_10_steps() -> None:
    log = read_hf_log(_lines("transformers4_numbers.log"), logging_steps=10)
    assert [s.step for s in log.parsed.steps] == [9, 19, 29]
    assert [s.loss for s in log.parsed.steps] == [2.4375, 2.2031, 2.0859]
    assert log.parsed.steps[1].extra["learning_rate"] == pytest.approx(4e-05)
    assert log.summary is not None and log.summary.extra == {"total_flos": 1254781501440000.0}
    assert log.parsed.steps[0].seconds == pytest.approx(96.2043 / 30)


@pytest.mark.unit
def test_the_generated_scripts_step_and_step_seconds_are_used_as_logged() -> None:
    log = read_hf_log(_lines("train_hf_tpu.log"))
    steps = log.parsed.steps
    assert log.step_time is StepTime.LOGGED
    assert [s.step for s in steps] == [0, 1, 2, 3, 4, 5]
    assert [s.seconds for s in steps][:3] == [96.3121, 2.4410, 1.9066]
    assert "step" not in steps[0].extra and "step_seconds" not in steps[0].extra
    assert read_log(_lines("train_hf_tpu.log")) == log.parsed


@pytest.mark.unit
def test_parse_step_reads_one_line_and_ignores_summary_eval_and_other_lines() -> None:
    tqdm = "\r 50%|█████     | 4/8 [00:08<00:08]\r      \r{'loss': '4.877', 'epoch': '0.5'}"
    step = parse_step(tqdm, index=3)
    assert step is not None and (step.step, step.loss) == (3, 4.877)
    logged = parse_step("{'loss': '7.5', 'step': 12, 'step_seconds': '1.9'}")
    assert logged is not None and (logged.step, logged.seconds) == (11, 1.9)
    assert parse_step("{'train_runtime': '3.1', 'train_loss': '4.2'}") is None
    assert parse_step("{'eval_loss': '4.95', 'epoch': '0.5'}") is None
    assert parse_step("loss went down") is None


@pytest.mark.unit
def test_log_values_that_are_not_literals_are_never_evaluated() -> None:
    hostile = "{'loss': __import__('os').system('touch /tmp/pwned'), 'epoch': '1'}"
    assert list(log_dicts(hostile)) == []
    assert read_hf_log([hostile]).parsed.steps == ()
    # a broken dict before a good one on the same line does not hide the good one
    found = list(log_dicts("{'loss': oops} {'loss': '3.5'}"))
    assert found == [{"loss": "3.5"}]


@pytest.mark.unit
def test_numbers_from_strings_nan_and_junk() -> None:
    assert number("5.564") == 5.564
    assert number(3) == 3.0
    assert math.isnan(number("nan") or 0.0)
    assert number("n/a") is None
    assert number(True) is None
    assert number(None) is None


@pytest.mark.unit
def test_a_log_without_steps_or_summary_has_no_step_time() -> None:
    log = read_hf_log(["starting", "{'not_a_log': 1}"])
    assert log.parsed.steps == () and log.summary is None and log.step_time is StepTime.NONE
    assert log.parsed.lines == 2


# ---- the script and the program -----------------------------------------------------------
@pytest.mark.unit
def test_the_training_script_matches_its_golden_file_and_compiles(update_golden: bool) -> None:
    text = render_train_script(HfSettings())
    check_golden(GOLDEN / "hf" / "train_hf.py.txt", text, update_golden)
    compile(text, SCRIPT_NAME, "exec")
    assert "xla_spawn" not in text and "num_cores" not in text
    assert "xr.use_spmd()" in text and '"xla_fsdp_v2": True' in text and '"fsdp": True' in text
    assert "logging_steps=1," in text and 'report_to=["wandb"] if settings["wandb"] else []' in text


def _settings_literal(script: str) -> dict[str, object]:
    tree = ast.parse(script)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SETTINGS":
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("no SETTINGS in the script")


@pytest.mark.unit
def test_settings_are_written_as_literals_even_with_quotes_and_newlines() -> None:
    odd = HfSettings(text_column='text\'\n"); import os; os.system("x")  #')
    script = render_train_script(odd)
    compile(script, SCRIPT_NAME, "exec")
    assert _settings_literal(script) == asdict(odd)
    assert "import os" not in script.split("SETTINGS = {", 1)[0]


@pytest.mark.unit
def test_no_secret_reaches_the_script_or_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("WANDB_API_KEY", "wandb-made-up-0123456789")
    program = hf_program(HfSettings(wandb=True))
    blob = json.dumps(
        [[f.text for f in program.files], program.args, program.env, program.requirements]
    )
    assert HF_TOKEN not in blob and "wandb-made-up" not in blob
    assert "token=" not in program.files[0].text.lower()  # the Hub client reads HF_TOKEN itself
    assert program.secret_env == ("HF_TOKEN", "WANDB_API_KEY")
    assert program.required_secrets == ("HF_TOKEN",)
    assert "wandb" in program.requirements


@pytest.mark.unit
def test_the_tpu_vm_program_runs_the_same_script_everywhere_with_pjrt_tpu() -> None:
    program = hf_program(HfSettings())
    assert program.args == (SCRIPT_NAME,)  # no --cpu, no xla_spawn, no per-worker argument
    assert dict(program.env)["PJRT_DEVICE"] == "TPU"
    assert program.requirements == (
        "torch==2.9.0",
        "torch_xla[tpu,pallas]==2.9.0",
        "transformers==5.23.0",
        "accelerate==1.15.0",
        "datasets==5.2.0",
    )
    assert program.key == "hf-5.23.0-torch-xla-2.9.0"
    assert [f.name for f in program.files] == [SCRIPT_NAME]
    assert program.secret_env == ("HF_TOKEN",)
    local = hf_program(HfSettings(model_id="/mnt/models/llama"))
    assert local.required_secrets == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"model_id": "../etc/passwd"}, "neither a Hub id"),
        ({"dataset": "a b"}, "not a Hub id"),
        ({"optim": "adamw_torch_fused"}, "not one of"),
        ({"learning_rate": 0.0}, "must be > 0"),
    ],
)
@pytest.mark.unit
def test_settings_that_cannot_work_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        HfSettings(**change)  # type: ignore[arg-type]


# ---- in the real runtime ---------------------------------------------------------------------
_NAMES_PROBE = """
import ast, dataclasses, json, sys
from transformers import TrainingArguments
from transformers.training_args import OptimizerNames
tree = ast.parse(open(sys.argv[1]).read())
keys = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "TrainingArguments":
        keys |= {k.arg for k in node.keywords if k.arg}
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "device_args":
        keys |= {k.value for k in node.value.keys}
fields = {f.name for f in dataclasses.fields(TrainingArguments)}
print(json.dumps({
    "unknown": sorted(keys - fields),
    "checked": sorted(keys),
    "optimizers": sorted(o.value for o in OptimizerNames),
}))
"""


@pytest.fixture(scope="module")
def hf_python() -> Path:
    return install_hf(SubprocessRunner(), lambda _: None)  # reused when present


@pytest.mark.runtime
def test_every_training_argument_the_script_passes_exists_in_transformers(
    hf_python: Path, tmp_path: Path
) -> None:
    script = tmp_path / SCRIPT_NAME
    script.write_text(render_train_script(HfSettings()), encoding="utf-8")
    result = SubprocessRunner().run([str(hf_python), "-c", _NAMES_PROBE, str(script)], timeout=300)
    assert result.ok, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["unknown"] == []
    assert {"fsdp", "fsdp_config", "optim", "bf16", "use_cpu", "logging_steps"} <= set(
        answer["checked"]
    )
    assert HfSettings().optim in answer["optimizers"]


@pytest.mark.runtime
def test_the_script_trains_a_tiny_llama_on_cpu_and_its_log_is_stored_as_a_run(
    hf_python: Path, tmp_path: Path
) -> None:
    script = tmp_path / SCRIPT_NAME
    script.write_text(render_train_script(HfSettings()), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_TOKEN": HF_TOKEN, "PYTHONUNBUFFERED": "1"}
    env.pop("PJRT_DEVICE", None)
    result = SubprocessRunner(env=env).run(
        [str(hf_python), str(script), "--cpu", "--max-steps", "10"], timeout=600
    )
    assert result.ok, result.text()[-3000:]
    text = result.stdout + result.stderr
    assert HF_TOKEN not in text

    log = read_hf_log(text.splitlines())
    steps = log.parsed.steps
    assert [s.step for s in steps] == list(range(10))
    assert log.step_time is StepTime.LOGGED
    assert all(s.loss is not None and math.isfinite(s.loss) for s in steps)
    assert all(s.seconds > 0 for s in steps)
    assert {"learning_rate", "grad_norm", "epoch"} <= set(steps[0].extra)
    assert log.summary is not None and (log.summary.runtime_seconds or 0) > 0

    store = RunStore(tmp_path / "store" / "runs.db")
    store.create_run(
        "hf0cpu01",
        model="tiny-llama",
        request="train_hf.py --cpu",
        launcher=LaunchPath.LOCAL,
        device_type="cpu-1",
        precision=Precision.BF16.value,
        project=None,
        cluster=None,
        region=None,
        zone=None,
        plan_json=None,
    )
    metrics = summarize(
        steps,
        slice=Slice.parse("cpu-1"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    store_metrics(store, "hf0cpu01", metrics)
    store.finish_run("hf0cpu01", RunStatus.SUCCEEDED)
    stored = store.steps("hf0cpu01")
    assert [s["step"] for s in stored] == list(range(10))
    assert all(s["seconds"] > 0 for s in stored)
    figures = store.metrics("hf0cpu01") or {}
    assert figures["steps_completed"] == 10
    assert figures["first_step_seconds"] == pytest.approx(steps[0].seconds)
    # a fixed seed on a CPU: the tiny model learns the counting pattern within 10 steps
    assert figures["loss"]["last"] < figures["loss"]["first"]


_HUB_DATA_PROBE = """
import importlib.util, json, sys, types
spec = importlib.util.spec_from_file_location("train_hf", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
calls = []

class Rows:
    def iter(self, batch_size):
        rows = ["hello world", "", "  ", "abc"] * 3
        for start in range(0, len(rows), batch_size):
            yield {"text": rows[start : start + batch_size]}

def load_dataset(*args, **kwargs):
    calls.append([list(args), kwargs])
    return Rows()

class Letters:
    eos_token_id = 0
    def __call__(self, texts):
        return {"input_ids": [[ord(c) for c in t] for t in texts]}

sys.modules["datasets"] = types.SimpleNamespace(load_dataset=load_dataset)
blocks = script.hub_blocks(Letters(), {**script.SETTINGS, "seq_len": 4}, 5)
print(json.dumps({"blocks": blocks, "calls": calls}))
"""


@pytest.mark.runtime
def test_the_tpu_path_cuts_the_hub_text_into_blocks_joined_by_eos(
    hf_python: Path, tmp_path: Path
) -> None:
    script = tmp_path / SCRIPT_NAME
    script.write_text(render_train_script(HfSettings()), encoding="utf-8")
    result = SubprocessRunner().run(
        [str(hf_python), "-c", _HUB_DATA_PROBE, str(script)], timeout=300
    )
    assert result.ok, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["calls"] == [[["Salesforce/wikitext", "wikitext-2-raw-v1"], {"split": "train"}]]
    hello = [ord(c) for c in "hello world"] + [0]
    # blank rows dropped, each text ended by EOS, blocks of 4, at most the 5 wanted
    assert answer["blocks"] == [hello[0:4], hello[4:8], hello[8:12], [97, 98, 99, 0], hello[0:4]]
