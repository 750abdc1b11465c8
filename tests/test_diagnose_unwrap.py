"""``diagnose`` reads the message inside another program's wrapper: prefixes of Ray, SkyPilot,
CI runners, Terraform and syslog stripped, JSON logs' and error bodies' message fields, escaped
text (a Python repr, a JSON string) unescaped and split at the line breaks it held; every piece
reported on the line it came from."""

from __future__ import annotations

import json

import pytest

from tpu_trainer.plan.diagnose import LiveScanner, diagnose
from tpu_trainer.plan.diagnose_unwrap import unwrap, wrapped

pytestmark = pytest.mark.unit

STEP = (
    "I1124 00:05:07.101995 140471507549056 metric_logger.py:265] completed step: 7, "
    "seconds: 0.226, TFLOP/s/device: 0.032, Tokens/s/device: 565.843, loss: 10.937"
)
HBM = (
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
    "Ran out of memory in memory space hbm. Used 40.12G of 31.25G hbm. Exceeded hbm capacity by 8.87G."
)


def test_unit_a_training_log_line_is_not_wrapped_and_comes_back_as_it_is() -> None:
    for line in (
        STEP,
        "completed step: 7, seconds: 0.226",
        "",
        "Traceback (most recent call last):",
    ):
        assert not wrapped(line) or unwrap(line) == (line,)
    assert not wrapped(STEP)


@pytest.mark.parametrize(
    "prefix",
    [
        "(RayTrainWorker pid=20411, ip=10.130.0.44) ",
        "(pid=9454) ",
        "(raylet, ip=10.0.0.3) ",
        "E 03-02 08:15:44 log_lib.py:417] ",
        "2025-02-03T09:12:44.5521930Z ",
        "2025-02-03T09:12:44.5521930Z ##[error]",
        'Step #3 - "train": ',
        "Step #0: ",
        "│ ",
        "Feb 15 18:17:04 node-1 kubelet[807]: ",
    ],
)
def test_unit_a_wrapper_prefix_is_stripped(prefix: str) -> None:
    line = prefix + HBM
    assert wrapped(line)
    assert unwrap(line) == (HBM,)
    assert [m.family for m in diagnose([STEP, line])][:1] == ["out-of-memory"]


def test_unit_a_prefix_logged_at_info_keeps_its_level_for_the_classifier() -> None:
    assert unwrap("I 03-02 08:15:44 provisioner.py:624] Cluster launched: a.") == (
        "INFO Cluster launched: a.",
    )
    assert unwrap("W 03-02 08:15:44 provisioner.py:624] Retrying.") == ("Retrying.",)


def test_unit_a_json_log_gives_the_line_then_its_message_fields() -> None:
    entry = {
        "insertId": "k3f9a01",
        "jsonPayload": {"message": "first\nsecond", "pid": 7},
        "error": "boom",
        "severity": "ERROR",
    }
    line = "2024-01-01T00:00:00.000Z\tERROR\tsetup\t" + json.dumps(entry)
    pieces = unwrap(line)
    assert pieces[0] == "ERROR\tsetup\t" + json.dumps(entry)
    assert pieces[1:] == ("ERROR\tsetup", "first", "second", "boom")


def test_unit_escaped_text_is_unescaped_and_split_where_it_held_line_breaks() -> None:
    line = r"failed: RuntimeError('a \'quoted\' name\n  File \"x.py\", line 3\ndone at C:\\new')"
    assert unwrap(line) == (
        "failed: RuntimeError('a 'quoted' name",
        '  File "x.py", line 3',
        "done at C:\\new')",
    )


def test_unit_text_escaped_twice_is_unescaped_twice() -> None:
    inner = json.dumps({"error": {"code": 403, "message": 'Permission "x.y" denied'}}, indent=1)
    line = "[API Error: " + json.dumps({"error": {"message": inner}}) + "]"
    assert '"message": "Permission "x.y" denied"' in [p.strip() for p in unwrap(line)]


def test_unit_a_repr_of_a_task_error_is_read_line_by_line_on_its_line() -> None:
    inner = "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector"
    line = (
        "ray.exceptions.RayTaskError(RuntimeError): ray::Slice.wait() (pid=3, ip=10.4.0.17)"
        f'\\n  File "m.py", line 8, in wait\\n{inner}\\n'
    )
    matches = diagnose([STEP, line, STEP])
    assert [(m.family, m.line) for m in matches][:1] == [("autoscaling-provisioning", 2)]


def test_unit_a_signature_found_in_several_pieces_of_a_line_counts_that_line_once() -> None:
    line = json.dumps({"level": "error", "msg": HBM, "error": HBM})
    matches = diagnose([line, STEP, line])
    assert matches[0].family == "out-of-memory"
    assert (matches[0].line, matches[0].count) == (1, 2)


def test_unit_a_reason_listed_under_a_wrapper_line_ranks_on_that_line() -> None:
    lines = [
        STEP,
        "Error: error creating NodePool: googleapi: Error 403: ",
        '        (1) insufficient regional quota to satisfy request: resource "TPUS": request '
        "requires '64.0' and is short '32.0'. project has a quota of '32.0' with '32.0' available.",
    ]
    matches = diagnose(lines)
    assert [(m.family, m.line) for m in matches][:2] == [("quota", 2), ("auth-permissions", 2)]


def test_unit_a_follower_reads_wrapped_lines_as_diagnose_does() -> None:
    scanner = LiveScanner()
    for line in [STEP, "(TrainWorker pid=7, ip=10.0.0.2) " + HBM]:
        scanner.feed(line)
    assert [(m.family, m.line) for m in scanner.fatal] == [("out-of-memory", 2)]


def test_unit_a_yaml_message_reads_as_it_was_written() -> None:
    """kubectl's ``-o yaml`` doubles the apostrophe of a single-quoted message and folds a long
    one onto an indented line: both read as the message Kueue wrote."""
    assert unwrap("    message: 'Can''t admit new workloads: FlavorNotFound'") == (
        "    message: 'Can't admit new workloads: FlavorNotFound'",
    )
    lines = [
        "status:",
        "  conditions:",
        "  - message: 'couldn''t assign flavors to pod set main: insufficient quota for cpu",
        "      in flavor default-flavor in ClusterQueue'",
        "    reason: Pending",
    ]
    first = diagnose(lines)[0]
    assert (first.signature, first.line) == ("kueue-tpu-quota", 3)
    assert "cpu in flavor default-flavor" in first.cause


def test_unit_a_command_line_after_a_shell_prompt_is_not_read() -> None:
    table = "NAME          ACCEPTED   PROVISIONED   FAILED   AGE"
    assert (
        diagnose(["$ kubectl get provisioningrequest", table, "req-1   True   False   False   22s"])
        == []
    )


def test_unit_a_bracketed_prefix_does_not_continue_the_line_before() -> None:
    """``[XPK]``, torch's ``[rank0]:`` and a bracketed timestamp start lines of their own; only a
    bracketed list of reasons continues a wrapper line ending in a colon."""
    wrapper = 'Error from server (Forbidden): pods "trainer-0" is forbidden:'
    listed = diagnose([STEP, wrapper, "[maximum cpu usage per Pod is 2, but limit is 4]"])
    assert (listed[0].family, listed[0].line) == ("quota", 2)
    prefixed = diagnose([STEP, "[rank0]: Traceback (most recent call last):", f"[rank0]: {HBM}"])
    assert (prefixed[0].family, prefixed[0].line) == ("out-of-memory", 3)
