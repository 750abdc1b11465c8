"""The gcloud of a rehearsal: which command lines go to the real gcloud, and finding it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.fakecloud.gcloud_dispatch import answered_by_fake, command_words
from tpu_trainer.infra.gcloud_parser import GcloudSdkMissingError
from tpu_trainer.simcloud.rehearsal import real_gcloud

pytestmark = pytest.mark.unit


def test_the_shim_hands_api_commands_to_the_real_gcloud() -> None:
    assert command_words(["--project=p", "beta", "container", "node-pools", "list"]) == [
        "container",
        "node-pools",
        "list",
    ]
    assert answered_by_fake(["auth", "list", "--format=json"])
    assert answered_by_fake(["config", "get", "account"])
    assert answered_by_fake(["alpha", "compute", "tpus", "tpu-vm", "ssh", "vm", "--zone=z"])
    assert not answered_by_fake(["beta", "compute", "reservations", "list"])
    assert not answered_by_fake(["container", "clusters", "describe", "c", "--region=r"])


def test_a_missing_gcloud_names_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(GcloudSdkMissingError) as caught:
        real_gcloud({"PATH": str(tmp_path)}, tmp_path / "bin")
    assert "https://cloud.google.com/sdk/docs/install" in str(caught.value.fix)
