"""``diagnose`` on messages filled in from the services' own format strings: GKE and Compute
Engine node-pool errors, the cluster autoscaler and ProvisioningRequest, Cloud TPU, Kueue's
admission and topology-aware scheduling, JobSet's failure conditions, the scheduler and kubelet
(resources, evictions, images, volumes, OOM kills), libtpu and JAX, gcloud credentials.

The messages (tests/fixtures/diagnose/service_formats.yaml) carry other names, sizes and counts
than the texts the catalog was written from, so they check that a family's patterns follow the
service's format rather than one example of it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import families
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.diagnose_score import NONE, predict

pytestmark = pytest.mark.unit

FORMATS = FIXTURES / "diagnose" / "service_formats.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    family: str
    text: str
    origin: str


def _messages() -> list[Message]:
    groups = yaml.safe_load(FORMATS.read_text(encoding="utf-8"))
    return [
        Message(family=m["family"], text=m["text"], origin=g["format"])
        for g in groups
        for m in g["messages"]
    ]


MESSAGES = _messages()
ERRORS = [m for m in MESSAGES if m.family != NONE]
QUIET = [m for m in MESSAGES if m.family == NONE]


def _id(m: Message) -> str:
    return f"{m.family}:{m.text[:48]}"


@pytest.mark.parametrize("message", ERRORS, ids=_id)
def test_unit_a_service_error_lands_in_its_family(message: Message) -> None:
    assert predict(message.text) == message.family, message.origin


@pytest.mark.parametrize("message", QUIET, ids=_id)
def test_unit_a_service_success_or_progress_message_matches_nothing(message: Message) -> None:
    assert diagnose(message.text.splitlines()) == []


def test_unit_the_formats_cover_every_family_the_services_report() -> None:
    covered = {m.family for m in ERRORS}
    assert covered <= {f.id for f in families()}
    expected = {
        "capacity-reservation", "nodepool-config", "quota", "autoscaling-provisioning",
        "tpu-vm-create", "kueue-admission", "jobset-webhook-crd", "scheduling",
        "preemption-maintenance", "out-of-memory", "image-entrypoint", "storage-mount",
        "tpu-runtime", "auth-permissions",
    }  # fmt: skip
    assert expected <= covered
    assert len(QUIET) >= 10


def test_unit_extracted_values_reach_the_fix() -> None:
    (admission,) = diagnose(
        ["Pod was rejected: Node didn't have enough resource: google.com/tpu, requested: 4, "
         "used: 4, capacity: 4"]
    )  # fmt: skip
    assert dict(admission.extracted) == {
        "resource": "google.com/tpu", "requested": "4", "used": "4", "capacity": "4",
    }  # fmt: skip
    assert "requested 4, in use 4 of 4" in admission.cause
    (api,) = diagnose(
        ["Kubernetes Engine API has not been used in project lab-3 before or it is disabled."]
    )
    assert "--project=lab-3" in api.fix
    (evicted,) = diagnose(
        ["The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
         "available: 1Gi. Container jax-tpu was using 95Gi, request is 0, has larger "
         "consumption of ephemeral-storage."]
    )  # fmt: skip
    assert evicted.signature == "pod-evicted"
    assert "low on ephemeral-storage (available 1Gi of the 10Gi reserve; jax-tpu used 95Gi)" in (
        evicted.cause
    )
