"""Reading the cluster's refusals of a server-side dry run (``infra.kube_check``): kubectl's own
texts (recorded from kubectl 1.32 against the Kubernetes API emulator, whose errors are the API
server's ``metav1.Status``) become the object, its fields and what to do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from tpu_trainer.infra.kube_check import (
    DRY_RUN_ARGS,
    ClusterRefusedError,
    Refusal,
    manifests_text,
    rejections,
)
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandFailed, CommandResult, DryRunRunner

pytestmark = pytest.mark.unit

FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "1xtpu7x-256"},
    "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": "tpu7x"}},
}
QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cluster-queue"},
    "spec": {},
}
LOCAL = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "multislice-queue", "namespace": "default"},
    "spec": {"clusterQueue": "cluster-queue"},
}
STRICT_ONE = "'Bogus' is not one of ['StrictFIFO', 'BestEffortFIFO']"
ONE_INVALID = f'The ClusterQueue "cluster-queue" is invalid: spec.queueingStrategy: Invalid value: {STRICT_ONE}\n'
BULLETED = (
    'The ClusterQueue "cluster-queue" is invalid: \n'
    f"* spec.queueingStrategy: Invalid value: {STRICT_ONE}\n"
    "* spec.stopPolicy: Invalid value: 'Nah' is not one of ['None', 'Hold', 'HoldAndDrain']\n"
)
TWO_REFUSED = (
    'Error from server (Invalid): error when creating "STDIN": ClusterQueue.kueue.x-k8s.io '
    f'"cluster-queue" is invalid: [spec.queueingStrategy: Invalid value: {STRICT_ONE}, '
    "spec.stopPolicy: Invalid value: 'Nah' is not one of ['None', 'Hold', 'HoldAndDrain']]\n"
    'Error from server (BadRequest): error when creating "STDIN": LocalQueue in version '
    '"v1beta2" cannot be handled as a LocalQueue: strict decoding error: unknown field '
    '"spec.bogus"\n'
)
PATCH_REFUSED = (
    "Error from server (BadRequest): error when applying patch:\n"
    '{"metadata":{"annotations":{}},"spec":{"bar":2,"foo":1}}\n'
    "to:\n"
    'Resource: "kueue.x-k8s.io/v1beta2, Resource=clusterqueues", GroupVersionKind: '
    '"kueue.x-k8s.io/v1beta2, Kind=ClusterQueue"\n'
    'Name: "cluster-queue", Namespace: ""\n'
    'for: "STDIN": error when patching "STDIN": ClusterQueue in version "v1beta2" cannot be '
    'handled as a ClusterQueue: strict decoding error: unknown field "spec.bar", unknown field '
    '"spec.foo"\n'
)
NOT_SERVED = (
    'error: resource mapping not found for name: "cluster-queue" namespace: "" from "STDIN": '
    'no matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1beta2"\n'
    "ensure CRDs are installed first\n"
)
FORBIDDEN = (
    'Error from server (Forbidden): error when creating "STDIN": clusterqueues.kueue.x-k8s.io is '
    'forbidden: User "trainer@example.com" cannot create resource "clusterqueues" in API group '
    '"kueue.x-k8s.io" at the cluster scope\n'
)


def test_one_invalid_object_names_the_object_its_field_and_the_servers_reason() -> None:
    (found,) = rejections(ONE_INVALID, [FLAVOR, QUEUE])
    assert (found.subject, found.refusal, found.group) == (
        "ClusterQueue cluster-queue",
        Refusal.INVALID,
        "kueue.x-k8s.io",
    )
    assert found.problems == (f"spec.queueingStrategy: Invalid value: {STRICT_ONE}",)
    assert found.fields == "spec.queueingStrategy"


def test_several_causes_bulleted_or_in_brackets_are_each_a_problem() -> None:
    (bulleted,) = rejections(BULLETED, [QUEUE])
    assert bulleted.fields == "spec.queueingStrategy, spec.stopPolicy"
    queue, local = rejections(TWO_REFUSED, [FLAVOR, QUEUE, LOCAL])
    assert queue.problems == bulleted.problems
    assert (local.subject, local.refusal) == ("LocalQueue multislice-queue", Refusal.UNKNOWN_FIELD)
    assert local.problems == ('unknown field "spec.bogus"',) and local.fields == "spec.bogus"


def test_a_refused_patch_of_an_existing_object_is_named_from_kubectls_name_line() -> None:
    (found,) = rejections(PATCH_REFUSED, [FLAVOR, QUEUE])
    assert found.subject == "ClusterQueue cluster-queue"
    assert found.fields == "spec.bar, spec.foo"


def test_an_unknown_field_warning_is_a_refusal_too() -> None:
    (found,) = rejections('Warning: unknown field "spec.bogus"\n', [LOCAL])
    assert (found.subject, found.refusal) == ("LocalQueue multislice-queue", Refusal.UNKNOWN_FIELD)
    deprecated = "Warning: This version is deprecated. Use v1beta2 instead.\n"
    assert rejections(deprecated, [LOCAL]) == []


@pytest.mark.parametrize(
    ("stderr", "fix"),
    [
        (NOT_SERVED, "install Kueue v0.19.2 or newer on the cluster (https://kueue.sigs.k8s.io"),
        (PATCH_REFUSED, "has no field spec.bar, spec.foo: its operator is older than the Kueue "),
        (ONE_INVALID, "correct spec.queueingStrategy: where the value is the cluster's own"),
        (FORBIDDEN, "`kubectl auth can-i create clusterqueue`"),
    ],
)
def test_the_error_says_what_to_do_for_each_kind_of_refusal(stderr: str, fix: str) -> None:
    error = ClusterRefusedError(rejections(stderr, [FLAVOR, QUEUE]))
    assert error.message.startswith("the cluster refused ClusterQueue cluster-queue (checked with")
    assert "nothing was applied" in error.message
    assert fix in error.fix


class _Answer:
    def __init__(self, code: int, stderr: str = "") -> None:
        self.code, self.stderr = code, stderr
        self.calls: list[tuple[list[str], str | None]] = []

    def run(self, argv: Sequence[str], **options: Any) -> CommandResult:
        self.calls.append((list(argv), options.get("stdin")))
        return CommandResult(tuple(argv), self.code, "", self.stderr, 0.0)


def test_check_sends_every_object_in_one_call_on_standard_input() -> None:
    runner = _Answer(0)
    Kubectl(runner).check([FLAVOR, QUEUE, LOCAL])
    ((argv, stdin),) = runner.calls
    assert argv == ["kubectl", *DRY_RUN_ARGS]
    assert stdin is not None and list(yaml.safe_load_all(stdin)) == [FLAVOR, QUEUE, LOCAL]
    assert stdin == manifests_text([FLAVOR, QUEUE, LOCAL])


def test_check_raises_the_refusal_and_a_kubectl_failure_otherwise() -> None:
    with pytest.raises(ClusterRefusedError) as refused:
        Kubectl(_Answer(1, TWO_REFUSED)).check([FLAVOR, QUEUE, LOCAL])
    assert [r.subject for r in refused.value.rejections] == [
        "ClusterQueue cluster-queue",
        "LocalQueue multislice-queue",
    ]
    unreachable = "The connection to the server 127.0.0.1:6443 was refused\n"
    with pytest.raises(CommandFailed, match="was refused") as failed:
        Kubectl(_Answer(1, unreachable)).check([FLAVOR])
    assert "kubectl get namespaces" in failed.value.fix


def test_under_the_tools_dry_run_the_check_is_printed_not_run() -> None:
    inner = _Answer(1, ONE_INVALID)
    printed: list[tuple[str, ...]] = []
    Kubectl(DryRunRunner(inner, on_record=printed.append)).check([QUEUE])
    assert inner.calls == []
    assert printed == [("kubectl", *DRY_RUN_ARGS)]
