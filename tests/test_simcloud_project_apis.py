"""The real gcloud against what the emulators serve for xpk beside GKE: the project's number
(Cloud Resource Manager), the TPU dashboard list (Cloud Monitoring), and the container registry
behind the rehearsal's egress proxy, which also refuses every other Google host."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpu_trainer.simcloud.egress import egress_env
from tpu_trainer.simcloud.local import LocalCloud, serve
from tpu_trainer.simcloud.registry import registry_server

pytestmark = pytest.mark.e2e

SCENARIO = {
    "project": "demo-project",
    "project_number": "314159265358",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster"},
    "behaviours": {"missing_images": ["gcr.io/demo-project/gone"]},
}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    folder = tmp_path_factory.mktemp("project-apis")
    with serve(SCENARIO, folder) as local:
        local.env.update(egress_env(folder, registry_server(local.state), local.env))
        yield local
        assert local.emulator.invalid() == []


def test_the_projects_number_is_resource_managers_and_another_project_is_refused(
    cloud: LocalCloud,
) -> None:
    shown = cloud.gcloud("projects", "describe", "demo-project", "--format=value(projectNumber)")
    assert (shown.returncode, shown.stdout.strip()) == (0, "314159265358"), shown.stderr
    whole = json.loads(cloud.gcloud("projects", "describe", "demo-project", "--format=json").stdout)
    assert whole["lifecycleState"] == "ACTIVE" and whole["projectId"] == "demo-project"
    other = cloud.gcloud("projects", "describe", "someone-elses")
    assert other.returncode == 1
    assert "does not have permission" in other.stderr


def test_the_project_has_no_monitoring_dashboards(cloud: LocalCloud) -> None:
    listed = cloud.gcloud(
        "monitoring", "dashboards", "list", "--project=demo-project",
        "--filter=displayName:'GKE - TPU Monitoring Dashboard'", "--format=value(name)",
    )  # fmt: skip
    assert (listed.returncode, listed.stdout) == (0, ""), listed.stderr


def test_the_registry_answers_gclouds_image_check_and_lacks_a_missing_image(
    cloud: LocalCloud,
) -> None:
    found = cloud.gcloud(
        "container", "images", "describe", "gcr.io/demo-project/runner:v1", "--format=json"
    )
    assert found.returncode == 0, found.stderr
    summary = json.loads(found.stdout)["image_summary"]
    assert summary["repository"] == "demo-project/runner"
    assert summary["digest"].startswith("sha256:")
    regional = cloud.gcloud(
        "container", "images", "describe", "us-docker.pkg.dev/demo-project/repo/runner:v1"
    )
    assert regional.returncode == 0, regional.stderr
    gone = cloud.gcloud("container", "images", "describe", "gcr.io/demo-project/gone")
    assert gone.returncode == 1
    assert "MANIFEST_UNKNOWN" in gone.stderr or "not found" in gone.stderr


def test_other_google_hosts_are_refused_on_this_machine(cloud: LocalCloud) -> None:
    proxy = urllib.request.ProxyHandler({"https": cloud.env["HTTPS_PROXY"]})
    context = ssl.create_default_context(cafile=cloud.env["REQUESTS_CA_BUNDLE"])
    opener = urllib.request.build_opener(proxy, urllib.request.HTTPSHandler(context=context))
    with pytest.raises(OSError, match="403"):
        opener.open("https://cloudresourcemanager.googleapis.com/v3/projects/x", timeout=10)


def test_the_registry_challenges_a_request_without_its_token(cloud: LocalCloud) -> None:
    proxy = urllib.request.ProxyHandler({"https": cloud.env["HTTPS_PROXY"]})
    context = ssl.create_default_context(cafile=cloud.env["REQUESTS_CA_BUNDLE"])
    opener = urllib.request.build_opener(proxy, urllib.request.HTTPSHandler(context=context))
    with pytest.raises(urllib.error.HTTPError) as challenged:
        opener.open("https://gcr.io/v2/", timeout=10)
    assert challenged.value.code == 401
    assert challenged.value.headers["WWW-Authenticate"] == (
        'Bearer realm="https://gcr.io/v2/token",service="gcr.io"'
    )


def test_the_egress_certificates_are_made_once_per_folder(tmp_path: Path) -> None:
    from tpu_trainer.simcloud.egress import egress_pki

    first = egress_pki(tmp_path).ca_file.read_bytes()
    assert egress_pki(tmp_path).ca_file.read_bytes() == first
