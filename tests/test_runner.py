"""The command runner: argv only, timeouts, streaming, redaction, dry runs."""

from __future__ import annotations

import sys

import pytest

from tpu_trainer.infra import runner
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import (
    CommandFailed,
    CommandResult,
    DryRunRunner,
    SubprocessRunner,
    is_read_only,
)

pytestmark = pytest.mark.unit


def test_runner_returns_code_and_output() -> None:
    r = SubprocessRunner().run([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"])
    assert (r.code, r.stdout.strip()) == (3, "hi")


def test_runner_refuses_a_shell_string() -> None:
    with pytest.raises(TypeError):
        SubprocessRunner().run("echo hi")


def test_runner_streams_lines() -> None:
    lines: list[tuple[str, str]] = []
    SubprocessRunner().run(
        [sys.executable, "-c", "print('a'); print('b')"],
        on_line=lambda s, line: lines.append((s, line)),
    )
    assert lines == [("stdout", "a"), ("stdout", "b")]


def test_a_streamed_command_keeps_only_its_last_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A followed log goes to ``on_line`` line by line; the result keeps its tail only."""
    monkeypatch.setattr(runner, "STREAMED_TAIL", 10_000)
    seen: dict[str, list[str]] = {"stdout": [], "stderr": []}
    script = "import sys\nfor n in range(50_000): print(f'line {n}')\nsys.stderr.write('err\\n')"
    r = SubprocessRunner().run(
        [sys.executable, "-c", script], on_line=lambda name, line: seen[name].append(line)
    )
    assert len(seen["stdout"]) == 50_000 and seen["stdout"][-1] == "line 49999"
    assert 9_990 < len(r.stdout) <= 10_000 and r.stdout.endswith("line 49999\n")
    assert r.stdout.startswith("line ") and r.stderr == "err\n"
    whole = SubprocessRunner().run([sys.executable, "-c", script])
    assert whole.stdout.count("\n") == 50_000  # not streamed: every line


def test_runner_times_out_with_124() -> None:
    r = SubprocessRunner().run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert r.code == 124
    assert "timed out" in r.stderr


def test_runner_missing_tool_is_127_and_check_names_it() -> None:
    with pytest.raises(CommandFailed) as info:
        SubprocessRunner().run(["no-such-tool-xyz"], check=True)
    assert "install no-such-tool-xyz" in info.value.fix


def test_runner_redacts_secrets_before_recording() -> None:
    seen: list[CommandResult] = []
    secret = "hf_abcdefghijklmnopqrstuvwxyz123456"
    runner = SubprocessRunner(recorder=seen.append, redactor=Redactor(env={"HF_TOKEN": secret}))
    runner.run([sys.executable, "-c", f"print('token is {secret}')", f"--token={secret}"])
    assert secret not in repr(seen)
    assert "***" in seen[0].stdout


def test_redactor_masks_known_patterns_without_env() -> None:
    red = Redactor(env={})
    assert red("WANDB_API_KEY=abc123secret") == "WANDB_API_KEY=***"
    assert "hf_" not in red("x hf_abcdefghijklmnopqrstuvwx y")


@pytest.mark.parametrize(
    ("argv", "read_only"),
    [
        (["gcloud", "container", "node-pools", "list", "--cluster=c"], True),
        (["gcloud", "beta", "compute", "reservations", "describe", "r"], True),
        (["gcloud", "beta", "container", "node-pools", "create", "np"], False),
        (["kubectl", "get", "clusterqueue", "x", "-o", "json"], True),
        (["kubectl", "patch", "configmap", "x"], False),
        (["xpk", "workload", "list", "--cluster=c"], True),
        (["xpk", "cluster", "adapt", "--cluster=c"], False),
    ],
)
def test_read_only_classification(argv: list[str], read_only: bool) -> None:
    assert is_read_only(argv) is read_only


def test_dry_run_records_mutations_and_runs_reads() -> None:
    dry = DryRunRunner(SubprocessRunner())
    created = dry.run(["gcloud", "beta", "container", "node-pools", "create", "np"])
    assert created.ok and not created.ran
    assert dry.recorded == [("gcloud", "beta", "container", "node-pools", "create", "np")]


def test_runner_cancel_stops_the_command_with_130() -> None:
    import threading

    cancel = threading.Event()
    seen: list[str] = []

    def on_line(_: str, line: str) -> None:
        seen.append(line)
        cancel.set()

    r = SubprocessRunner().run(
        [sys.executable, "-u", "-c", "import time; print('go'); time.sleep(30)"],
        on_line=on_line,
        cancel=cancel,
    )
    assert r.code == 130
    assert seen == ["go"]


def test_a_failed_gcloud_keeps_its_key_lines_and_names_the_login_command() -> None:
    from tpu_trainer.infra.runner import CommandFailed, CommandResult

    stderr = (
        "ERROR: (gcloud.container.node-pools.create) You do not currently have an active "
        "account selected.\nPlease run:\n\n  $ gcloud auth login\n\nto obtain new credentials."
        "\n\nIf you have already logged in with a different account, run:\n\n  $ gcloud "
        "config set account ACCOUNT\n\nto select an already authenticated account to use.\n"
    )
    result = CommandResult(
        ("gcloud", "beta", "container", "node-pools", "create"), 1, "", stderr, 1
    )
    error = CommandFailed(result)
    assert "You do not currently have an active account selected." in error.message
    assert "to select an already authenticated account to use." in error.message
    assert " | " not in error.message and "\n\n" not in error.message
    assert "gcloud auth login" in error.fix
    assert "RUN" not in error.fix
