"""``tpu-trainer diagnose``, the command: exit status, the table and the JSON it prints, and
the input it refuses (missing, unreadable, empty or binary), through a Typer app of its own."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import FIXTURES
from tpu_trainer.cli.diagnose_cmd import diagnose as diagnose_command
from tpu_trainer.errors import InputError

pytestmark = pytest.mark.unit

LOGS = FIXTURES / "logs"


# ---------------------------------------------------------------------------------------------
# Bad input to the command
# ---------------------------------------------------------------------------------------------


def make_app() -> typer.Typer:
    app = typer.Typer()
    app.command()(diagnose_command)
    return app


runner = CliRunner()


def invoke_error(args: list[str], stdin: bytes | None = None) -> InputError:
    result = runner.invoke(make_app(), args, input=stdin)
    assert isinstance(result.exception, InputError), result.output
    assert result.exception.exit_code == 2
    assert result.exception.fix
    return result.exception


def test_cli_binary_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "core.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    error = invoke_error([str(path)])
    assert "binary" in error.message and "core.bin" in error.message


def test_cli_undecodable_bytes_without_nul_are_binary(tmp_path: Path) -> None:
    path = tmp_path / "latin.dat"
    path.write_bytes(bytes(range(0x80, 0x100)) * 20)
    assert "binary" in invoke_error([str(path)]).message


def test_cli_binary_standard_input_is_an_input_error() -> None:
    error = invoke_error(["-"], stdin=b"\x00\x01\x02 hello")
    assert "standard input is binary" in error.message


@pytest.mark.parametrize("content", [b"", b"\n\n   \n"])
def test_cli_empty_input_is_an_input_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(content)
    error = invoke_error([str(path)])
    assert "is empty" in error.message
    assert "kubectl" in error.fix


def test_cli_unreadable_file_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret.log"
    path.write_text("StopIteration\n", encoding="utf-8")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    error = invoke_error([str(path)])
    assert "cannot read" in error.message and "Permission denied" in error.message
    assert "tpu-trainer diagnose -" in error.fix


def test_cli_gzip_data_is_unpacked_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "run.log"  # no .gz suffix
    path.write_bytes(gzip.compress(b"x\nStopIteration\n"))
    result = runner.invoke(make_app(), [str(path), "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert doc["lines"] == 2
    assert doc["matches"][0]["family"] == "data-exhausted"


def test_cli_a_few_bad_bytes_in_a_text_log_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(b"step 1 \xff ok\n" + b"completed step: 1\n" * 200 + b"StopIteration\n")
    result = runner.invoke(make_app(), [str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["matches"][0]["line"] == 202


def test_cli_json_lists_matches_in_rank_order_with_their_family(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    path.write_text(
        "Warning  FailedScheduling  0/4 nodes are available: 4 Insufficient google.com/tpu.\n"
        "Message: jobset failed due to reaching max number of restarts\n",
        encoding="utf-8",
    )
    result = runner.invoke(make_app(), [str(path), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert [(m["family"], m["line"]) for m in doc["matches"]] == [
        ("scheduling", 1),
        ("jobset-webhook-crd", 2),
    ]
    assert doc["matches"][0]["extracted"] == {"n": "4"}
    assert doc["matches"][0]["source"].startswith("https://")


def test_cli_table_shows_rank_family_and_fix() -> None:
    result = runner.invoke(
        make_app(),
        ["-"],
        input="ModuleNotFoundError: No module named 'MaxText'\n",
        env={"COLUMNS": "240"},
    )
    assert result.exit_code == 1
    assert "image-entrypoint / python-module-missing" in result.output
    assert "maxtext.trainers.pre_train.train" in result.output


# ---------------------------------------------------------------------------------------------
# The command, through a Typer app of its own (the real one registers it as `diagnose`)
# ---------------------------------------------------------------------------------------------


def test_cli_fatal_log_exits_1_and_shows_the_fix() -> None:
    result = runner.invoke(
        make_app(), [str(LOGS / "maxtext_aot_hbm_oom.log")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1, result.output
    assert "hbm-oom-compile" in result.output
    assert "151.15G" in result.output


def test_cli_clean_log_exits_0() -> None:
    result = runner.invoke(make_app(), [str(LOGS / "maxtext_cpu_clean.log")])
    assert result.exit_code == 0, result.output
    assert "No known error in 23 lines" in result.output


def test_cli_warnings_only_exit_0() -> None:
    text = "W tensorflow] Allocation of 414988800 exceeds 10% of free system memory.\n"
    result = runner.invoke(make_app(), ["-", "--json"], input=text)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [m["signature"] for m in doc["matches"]] == ["host-allocation-warning"]


def test_cli_json_from_stdin_follows_the_contract() -> None:
    text = (LOGS / "maxtext_weight_decay.log").read_text(encoding="utf-8")
    result = runner.invoke(make_app(), ["-", "--json"], input=text)
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["log"] == "standard input"
    assert doc["lines"] == len(text.splitlines())
    (item,) = doc["matches"]
    assert {"family", "line", "extracted", "cause", "fix", "source"} <= set(item)
    assert item["family"] == "training-config"
    assert item["extracted"]["key"] == "weight_decay"
    assert item["signature"] == "maxtext-unknown-key"
    assert "muon_weight_decay" in item["fix"]


def test_cli_reads_gzip_logs(tmp_path: Path) -> None:
    path = tmp_path / "run.log.gz"
    with gzip.open(path, "wt", encoding="utf-8") as gz:
        gz.write((LOGS / "almodel_stop_iteration.log").read_text(encoding="utf-8"))
    result = runner.invoke(make_app(), [str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["matches"][0]["signature"] == "data-exhausted"


def test_cli_missing_file_is_an_input_error_with_a_fix(tmp_path: Path) -> None:
    result = runner.invoke(make_app(), [str(tmp_path / "nope.log")])
    assert isinstance(result.exception, InputError)
    assert "does not exist" in result.exception.message
    assert "tpu-trainer diagnose -" in result.exception.fix
    assert result.exception.exit_code == 2


def test_cli_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        diagnose_command(str(tmp_path))


def test_cli_direct_call_prints_json_and_raises_exit_on_fatal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as exit_info:
        diagnose_command(str(LOGS / "gke_events.log"), as_json=True)
    assert exit_info.value.exit_code == 1
    doc = json.loads(capsys.readouterr().out)
    assert "kueue-preempted" in [item["signature"] for item in doc["matches"]]


def test_cli_direct_call_on_clean_log_returns(capsys: pytest.CaptureFixture[str]) -> None:
    diagnose_command(str(LOGS / "maxtext_cpu_clean.log"), as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["matches"] == [] and doc["lines"] == 23
