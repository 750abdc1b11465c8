"""The catalog's data files: each ships inside the package, loads, and holds the table it should
(counts and spot values a wrong loader would get wrong); a malformed one names file and key."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.catalog.accelerators import (
    ACCELERATORS,
    ACCELERATORS_FILE,
    Family,
    Precision,
    family_from_prefix,
    known_prefixes,
    load_accelerators,
)
from tpu_trainer.catalog.crd_releases import CRD_RELEASES_FILE, crd_releases, load_crd_releases
from tpu_trainer.catalog.data_file import DataFileError, parse_mapping, read_packaged
from tpu_trainer.catalog.error_derive import (
    COMMON_MAXTEXT_KEYS,
    DERIVE_TABLES_FILE,
    KEY_RENAMES,
    MESH_AXES,
    load_derive_tables,
)
from tpu_trainer.catalog.error_signatures import CATALOG_FILE, load_catalog
from tpu_trainer.catalog.prices import PRICES_FILE, load_prices
from tpu_trainer.catalog.step_times import STEP_TIMES_FILE, load_step_times
from tpu_trainer.catalog.tpu_kinds import TPU_KINDS_FILE, load_tpu_kinds

pytestmark = pytest.mark.unit

PACKAGE = "tpu_trainer.catalog"
LOADERS: dict[str, Callable[[str, str], object]] = {
    ACCELERATORS_FILE: load_accelerators,
    DERIVE_TABLES_FILE: load_derive_tables,
    TPU_KINDS_FILE: load_tpu_kinds,
    CATALOG_FILE: load_catalog,
    PRICES_FILE: load_prices,
    STEP_TIMES_FILE: load_step_times,
    CRD_RELEASES_FILE: load_crd_releases,
}


def test_every_catalog_yaml_has_a_loader_and_loads_from_the_package_resources() -> None:
    shipped = {
        f.name for f in resources.files(PACKAGE).iterdir() if f.name.endswith((".yaml", ".yml"))
    }
    assert shipped == set(LOADERS)
    for name, load in LOADERS.items():
        assert load(read_packaged(PACKAGE, name), name)


def test_every_shipped_crd_loads_from_the_package_resources() -> None:
    crds = resources.files(PACKAGE).joinpath("crds")
    files = [
        f for d in crds.iterdir() if d.is_dir() for f in d.iterdir() if f.name.endswith(".yaml")
    ]
    assert len(files) >= 5
    for file in files:
        doc = parse_mapping(file.read_text("utf-8"), file.name)
        assert doc["kind"] == "CustomResourceDefinition", file.name


def test_every_crd_release_names_shipped_crds_of_its_group_and_kinds() -> None:
    crds = resources.files(PACKAGE).joinpath("crds")
    releases = crd_releases()
    assert {r.named for r in releases.values()} == {
        "Kueue v0.19.2",
        "JobSet v0.12.0",
        "KubeRay v1.7.0",
    }
    for group, release in releases.items():
        for kind, file in release.kinds.items():
            doc: Any = parse_mapping(crds.joinpath(file).read_text("utf-8"), file)
            assert (doc["spec"]["group"], doc["spec"]["names"]["kind"]) == (group, kind)


def test_a_crd_release_without_kinds_names_file_and_key() -> None:
    text = "crd_releases:\n  ray.io: {project: KubeRay, release: v1, install: x, kinds: {}}\n"
    with pytest.raises(DataFileError, match=r"crd_releases.ray.io: kinds must map"):
        load_crd_releases(text)


def test_the_build_ships_every_catalog_data_file() -> None:
    """Each data file under the catalog matches a package-data pattern of pyproject.toml (the
    patterns setuptools copies into the wheel)."""
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["tpu_trainer"]
    package = root / "src" / "tpu_trainer"
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    data = {p for p in (package / "catalog").rglob("*") if p.suffix in {".yaml", ".yml", ".json"}}
    assert len(data) >= len(LOADERS) + 5
    assert data <= shipped, sorted(str(p.relative_to(package)) for p in data - shipped)


def test_the_accelerator_table_round_trips() -> None:
    assert list(ACCELERATORS) == [
        Family.V7,
        Family.V6E,
        Family.V5P,
        Family.V5E,
        Family.V4,
        Family.CPU,
    ]
    assert all(acc.family is family for family, acc in ACCELERATORS.items())
    v7, v5p, v4, cpu = (ACCELERATORS[f] for f in (Family.V7, Family.V5P, Family.V4, Family.CPU))
    assert v7.usable_hbm_gib_per_device == pytest.approx(94.74)
    assert v7.peak_tflops == {Precision.BF16: 2307.0, Precision.FP8: 4614.0}
    assert all(type(v) is float for v in v4.peak_tflops.values())
    assert v4.peak_tflops_per_chip(Precision.FP8) == 275.0  # no fp8 figure: bf16's
    assert cpu.peak_tflops == {} and cpu.peak_tflops_per_chip(Precision.BF16) == 0.0
    assert v7.xpk_number_counts_tensorcores is True and v7.multi_host_needs_workload_policy
    assert v7.tpu_vm_runtime is None and v5p.machine_type_single_chip is None
    assert v7.other_machine_types == ("tpu7x-ultranet-4t",)
    assert ACCELERATORS[Family.V6E].other_machine_types == ()
    assert (cpu.gke_accelerator, cpu.machine_type, cpu.hbm_gb_per_chip) == ("", "", 0)
    assert v7.topology.listed == ("1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4")
    assert cpu.topology.listed == ("1",) and cpu.topology.dims == 1
    assert ACCELERATORS[Family.V6E].topology.listed[-1] == "16x16"
    assert (v7.topology.cube_max, v5p.topology.cube_max, v4.topology.cube_max) == (144, 140, 64)
    assert v4.topology.nondecreasing is False and v7.topology.nondecreasing is True
    assert len(v7.topology.number_form_defaults) == 63
    assert v5p.topology.number_form_defaults == v7.topology.number_form_defaults - {"16x16x32"}
    assert v4.topology.number_form_defaults == {"4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16"}
    assert ACCELERATORS[Family.V5E].topology.number_form_defaults == frozenset()


def test_the_prefix_aliases_round_trip() -> None:
    assert len(known_prefixes()) == 11
    assert known_prefixes()[0] == "tpu7x"
    assert family_from_prefix("IRONWOOD") is Family.V7
    assert family_from_prefix("v5litepod") is Family.V5E
    assert family_from_prefix("trillium") is Family.V6E
    assert family_from_prefix("v3") is None


def test_the_derive_tables_round_trip() -> None:
    assert len(MESH_AXES) == 12
    assert (MESH_AXES[0], MESH_AXES[3], MESH_AXES[8]) == ("diloco", "fsdp", "tensor")
    assert len(KEY_RENAMES) == 22
    assert KEY_RENAMES["weight_decay"] == ("adam_weight_decay", "muon_weight_decay")
    assert KEY_RENAMES["lr"] == ("learning_rate",)
    assert all(type(v) is tuple for v in KEY_RENAMES.values())
    assert len(COMMON_MAXTEXT_KEYS) == 82
    assert COMMON_MAXTEXT_KEYS[0] == "run_name"
    assert COMMON_MAXTEXT_KEYS[-1] == "parameter_memory_host_offload"
    assert type(COMMON_MAXTEXT_KEYS) is tuple


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("  v6e:\n    name:", "  v9:\n    name:", "accelerators.v9"),
        ("hbm_gb_per_chip: 192", "hbm_gb_per_chip: lots", "accelerators.v7: hbm_gb_per_chip"),
        ("usable_hbm_gib_per_device: 94.74", "usable_hbm_gib: 94.74", "unknown key usable_hbm_gib"),
        ("peak_tflops: {bf16: 918.0,", "peak_tflops: {bf32: 918.0,", "peak_tflops.bf32"),
        (
            "    tpu_vm_runtime: null\n    topology:\n      dims: 3",
            "    topology:\n      dims: 3",
            "v7: tpu_vm_runtime",
        ),
        (
            "multi_host_needs_workload_policy: true",
            "multi_host_needs_workload_policy: yes please",
            "multi_host_needs_workload_policy must be true or false",
        ),
        ("number_form_defaults: v4", "number_form_defaults: v3", "v4.topology: number_form"),
        ("number_form_except: [16x16x32]", "number_form_except: [16x16x64]", "16x16x64"),
        ("  ironwood: v7", "  ironwood: v9", "prefix_aliases.ironwood"),
        ("  v5litepod: v5e\n", "", "prefix_aliases.v5litepod must name v5e"),
        ("  cpu:\n    name: CPU", "  cpux:\n    name: CPU", "accelerators.cpux"),
    ],
)
def test_a_malformed_accelerators_file_names_file_and_key(old: str, new: str, named: str) -> None:
    text = read_packaged(PACKAGE, ACCELERATORS_FILE)
    assert text.count(old) == 1
    with pytest.raises(DataFileError) as raised:
        load_accelerators(text.replace(old, new), "acc.yaml")
    assert str(raised.value).startswith("acc.yaml: ")
    assert named in str(raised.value)


def test_an_accelerators_file_missing_a_family_says_which() -> None:
    text = read_packaged(PACKAGE, ACCELERATORS_FILE)
    start = text.index("  # This machine's CPU")
    end = text.index("# xpk prefixes")
    with pytest.raises(DataFileError, match=r"acc\.yaml: accelerators: cpu missing"):
        load_accelerators(text[:start] + text[end:], "acc.yaml")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("mesh_axes: [data, data]\nkey_renames: {}\ncommon_maxtext_keys: [steps]", "data twice"),
        ("mesh_axes: []\nkey_renames: {}\ncommon_maxtext_keys: [steps]", "mesh_axes must list"),
        ("mesh_axes: [data]\nkey_renames: {lr: []}\ncommon_maxtext_keys: [s]", "key_renames.lr"),
        ("mesh_axes: [data]\nkey_renames: {lr: 3}\ncommon_maxtext_keys: [s]", "key_renames: lr"),
        ("mesh_axes: [data]\nkey_renames: {}\ncommon_keys: [s]", "unknown key common_keys"),
    ],
)
def test_a_malformed_derive_tables_file_names_file_and_key(text: str, named: str) -> None:
    with pytest.raises(DataFileError) as raised:
        load_derive_tables(text, "derive.yaml")
    assert str(raised.value).startswith("derive.yaml: ")
    assert named in str(raised.value)
