"""YAML for kubectl: strings YAML 1.2 reads as numbers are written quoted, the rest as before."""

from __future__ import annotations

import pytest
import yaml

from tpu_trainer.infra.kube_yaml import dump_all

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", ["60368e75", "1e5", "-2.5E-3", "0o17", "0x1f", ".inf", ".NaN"])
def test_unit_a_string_yaml_1_2_reads_as_a_number_is_quoted(text: str) -> None:
    written = dump_all([{"metadata": {"labels": {"run": text}}}])
    assert f"run: '{text}'" in written
    assert yaml.safe_load(written) == {"metadata": {"labels": {"run": text}}}


def test_unit_other_values_are_written_as_before() -> None:
    objects = [{"kind": "Pod", "spec": {"replicas": 2, "ratio": 0.5, "name": "tpt-5f3a9c1d"}}]
    assert dump_all(objects) == yaml.safe_dump_all(objects, sort_keys=False)
