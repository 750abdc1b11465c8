"""MaxText key tables per version: the packaged file, choosing the version a recipe is judged
against (flag, configuration, README pin, default), renames between versions with the flags that
fix them, ``--unset KEY`` and ``--skip-check NAME``."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import CONFIG, RECIPES, RECIPES_ROOT
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.catalog.data_file import DataFileError
from tpu_trainer.checks.run import fast_findings
from tpu_trainer.checks.skip import skip_findings, skips
from tpu_trainer.cli.check_cmd import check as check_command
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.maxtext.version_select import (
    VersionSource,
    readme_pin,
    select_version,
)
from tpu_trainer.frameworks.maxtext.versions import load_versions, maxtext_versions
from tpu_trainer.plan.plan import CheckOptions, Finding, Level, Plan, PlanOptions

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 24, 6, 0)
README = """# Recipe
```bash
# Clone MaxText Repository and Checkout Recipe Branch
git clone https://github.com/AI-Hypercomputer/maxtext.git
cd maxtext
git checkout {pin}
```
"""


def test_packaged_tables_hold_the_releases_and_the_recipe_pins() -> None:
    versions = maxtext_versions()
    assert versions.reference == "0.2.5"
    assert {"0.1.0", "0.2.4", "0.2.5", "a0fceb5", "maxtext-tutorial-v1.5.0"} <= set(versions.tables)
    old, new = versions.tables["98a3d4c"], versions.tables["0.2.5"]
    assert "fsdp_shard_on_exp" in old.keys and "fsdp_shard_on_exp" not in new.keys
    assert new.keys["shard_exp_on_fsdp"] == "bool"
    assert "gemma4-26b" in new.models and "gemma4-26b" not in old.models
    rename = versions.renames["fsdp_shard_on_exp"]
    assert (rename.new, rename.after) == ("shard_exp_on_fsdp", "98a3d4c")
    assert rename.date.startswith("2026-")


@pytest.mark.parametrize(
    ("asked", "name"),
    [
        ("0.2.5", "0.2.5"),
        ("v0.2.4", "0.2.4"),
        ("a0fceb5", "a0fceb5"),
        ("a0fceb5bd2cd0b42f0e3e65e4b944c2112731105", "a0fceb5"),
        ("maxtext-tutorial-v1.1.0-1109-gcf051eb03", "maxtext-tutorial-v1.1.0-1109-gcf051eb03"),
        ("tutorial-v9-3-gcf051eb0", "maxtext-tutorial-v1.1.0-1109-gcf051eb03"),
        ("maxtext-tutorial-v1.5.0", "maxtext-tutorial-v1.5.0"),
    ],
)
def test_a_version_is_found_by_release_tag_commit_or_describe(asked: str, name: str) -> None:
    found = maxtext_versions().find(asked)
    assert found is not None and found.name == name


def test_unknown_versions_are_not_found() -> None:
    for asked in ("0.9.9", "deadbeef", "feature-branch", "abc"):
        assert maxtext_versions().find(asked) is None


def test_a_malformed_table_names_the_file_and_key() -> None:
    good = "reference: r\nrenames: {}\nversions:\n  r: {source: pypi, revision: r, date: d, "
    load_versions(good + "config: c, keys: {a: int}, models: []}\n")
    with pytest.raises(DataFileError, match=r"versions\.r: keys\.a must be one of bool"):
        load_versions(good + "config: c, keys: {a: integer}, models: []}\n")
    chained = good + "config: c, keys: {a: int}, models: []}\n  s: {source: git, revision: s, "
    with pytest.raises(DataFileError, match=r"versions\.s: against must name another version"):
        load_versions(chained + "date: d, config: c, against: s, added: {}, removed: []}\n")
    table = load_versions(
        chained + "date: d, config: c, against: r, added: {b: str}, removed: [a], "
        "models_added: [m], models_removed: []}\n"
    ).tables["s"]
    assert dict(table.keys) == {"b": "str"} and table.models == {"m"}


def test_readme_pin_reads_the_maxtext_checkout_only() -> None:
    assert readme_pin(README.format(pin="a0fceb5")) == "a0fceb5"
    diffusion = README.replace("maxtext.git", "maxdiffusion.git").format(pin="v3")
    assert readme_pin(diffusion) is None
    assert readme_pin("pip install maxtext==0.2.3\n") == "0.2.3"
    assert readme_pin("no pin here\ngit checkout main\n") is None


def test_selection_order_flag_configuration_readme_default(tmp_path: Path) -> None:
    script = tmp_path / "xpk" / "run_recipe.sh"
    script.parent.mkdir()
    (tmp_path / "README.md").write_text(README.format(pin="98a3d4c"))
    flag = select_version("0.2.4", "a0fceb5", script)
    assert (flag.table.name, flag.source) == ("0.2.4", VersionSource.FLAG)
    config = select_version(None, "a0fceb5", script)
    assert (config.table.name, config.source) == ("a0fceb5", VersionSource.CONFIG)
    pin = select_version(None, None, script)
    assert (pin.table.name, pin.source, pin.where) == ("98a3d4c", VersionSource.README, "README.md")
    assert "from the recipe README's pin (README.md)" in pin.why()
    default = select_version(None, None, tmp_path / "a" / "b" / "run_recipe.sh")
    assert default.source is VersionSource.DEFAULT and default.is_reference
    main = select_version(None, "main", None)
    assert main.table.name == "0.2.5" and "main: the newest known version" in main.why()
    missing = select_version("0.9.9", None, None)
    assert missing.missing and missing.is_reference and "not in the packaged" in missing.why()


def _recipe(tmp_path: Path, pin: str | None, extra: str = "fsdp_shard_on_exp=True") -> Path:
    """The classic fixture recipe with an older MaxText key, and a README pinning ``pin``."""
    folder = tmp_path / "tinyllama-8b" / "8k-bf16-tpu7x-2x2x1"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], folder / "xpk")
    script = folder / "xpk" / "run_recipe.sh"
    text = script.read_text().replace("steps=20 \\\n", f"steps=20 \\\n{extra} \\\n")
    script.write_text(text)
    if pin:
        (folder / "README.md").write_text(README.format(pin=pin))
    return folder / "xpk"


def _config(tmp_path: Path) -> Path:
    """The test configuration without maxtext_branch (so the README pin decides)."""
    lines = CONFIG.read_text().splitlines()
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(ln for ln in lines if not ln.startswith("maxtext_branch")) + "\n")
    return path


def _plan(tmp_path: Path, folder: Path, **opts: object) -> Plan:
    options = PlanOptions(user="test_user", now=NOW, profiler=None, **opts)  # type: ignore[arg-type]
    return plan_request(Request(str(folder), config_path=_config(tmp_path)), options)


def _by_name(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.name: f for f in findings}


def test_pinned_recipe_passes_and_the_runtime_version_names_the_rename(tmp_path: Path) -> None:
    folder = _recipe(tmp_path, "98a3d4c")
    pinned = _by_name(fast_findings(_plan(tmp_path, folder)).findings)
    assert pinned["maxtext-config keys"].status is Level.PASS
    assert "98a3d4c (2026-01-02)" in pinned["maxtext-config keys"].message
    assert "README" in pinned["maxtext-config version"].message
    latest = _plan(tmp_path, folder, checks=CheckOptions(maxtext_version="0.2.5"))
    keys = _by_name(fast_findings(latest).findings)["maxtext-config keys"]
    assert keys.status is Level.FAIL
    assert "`fsdp_shard_on_exp` was renamed `shard_exp_on_fsdp` after 98a3d4c" in keys.message
    assert "your image runs 0.2.5" in keys.message
    assert keys.fix.endswith("--unset fsdp_shard_on_exp --set shard_exp_on_fsdp=True")


def test_the_pasted_fix_makes_the_check_pass(tmp_path: Path) -> None:
    folder = _recipe(tmp_path, None)
    fixed = _plan(
        tmp_path, folder, unset=("fsdp_shard_on_exp",), overrides=(("shard_exp_on_fsdp", "True"),)
    )
    assert "fsdp_shard_on_exp=True" not in fixed.program_arg_texts
    assert "shard_exp_on_fsdp=True" in fixed.program_arg_texts
    assert any(c.key == "fsdp_shard_on_exp" and c.why == "--unset" for c in fixed.arg_changes)
    keys = _by_name(fast_findings(fixed).findings)["maxtext-config keys"]
    assert keys.status is Level.PASS


def test_a_key_of_newer_versions_says_which_and_the_flag(tmp_path: Path) -> None:
    folder = _recipe(tmp_path, "maxtext-tutorial-v1.5.0", extra="shard_exp_on_fsdp=True")
    keys = _by_name(fast_findings(_plan(tmp_path, folder)).findings)["maxtext-config keys"]
    assert keys.status is Level.FAIL
    assert "newer name of `fsdp_shard_on_exp`" in keys.message
    assert "--unset shard_exp_on_fsdp --set fsdp_shard_on_exp=True" in keys.fix


def test_unset_of_a_missing_argument_lists_the_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="has no argument no_such_key") as caught:
        _plan(tmp_path, _recipe(tmp_path, None), unset=("no_such_key",))
    assert "model_name" in caught.value.fix


def test_skip_check_leaves_out_what_it_names_and_says_so() -> None:
    findings = (
        Finding("mesh-ici", Level.FAIL, "m"),
        Finding("mesh (AOT)", Level.PASS, "m"),
        Finding("meshy", Level.PASS, "m"),
        Finding("maxtext-config keys", Level.FAIL, "k"),
    )
    kept = skip_findings(findings, ["mesh"])
    assert [f.name for f in kept] == ["meshy", "maxtext-config keys", "skipped checks"]
    assert "2 finding(s) left out" in kept[-1].message and kept[-1].status is Level.WARN
    assert skip_findings(findings, []) == findings
    assert skips(["mesh"], "mesh-mapping (JAX)") and skips(["memory-fit"], "memory-fit (AOT)")
    assert not skips(["maxtext-config keys"], "maxtext-config")
    with pytest.raises(InputError, match="--skip-check nope: no check has that name") as caught:
        skip_findings(findings, ["nope"])
    assert "maxtext-config keys" in caught.value.fix and "resumability" in caught.value.fix


def test_check_command_unset_and_skip_check(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(check_command)
    folder = _recipe(tmp_path, None)
    config = str(_config(tmp_path))
    base = [str(folder), "--config", config, "--fast", "--json"]
    failing = CliRunner().invoke(app, base)
    assert failing.exit_code == 1, failing.output
    names = {c["name"]: c for c in json.loads(failing.output)["checks"]}
    assert names["maxtext-config keys"]["status"] == "fail"
    fix = names["maxtext-config keys"]["fix"].rsplit("Add to the command: ", 1)[1]
    pasted = CliRunner().invoke(app, [*base, *fix.split()])
    checks = {c["name"]: c for c in json.loads(pasted.output)["checks"]}
    assert checks["maxtext-config keys"]["status"] == "pass"
    skipped = CliRunner().invoke(app, [*base, "--skip-check", "maxtext-config keys"])
    checks = {c["name"]: c for c in json.loads(skipped.output)["checks"]}
    assert "maxtext-config keys" not in checks and "skipped checks" in checks
    older = CliRunner().invoke(app, [*base, "--maxtext-version", "98a3d4c"])
    checks = {c["name"]: c for c in json.loads(older.output)["checks"]}
    assert checks["maxtext-config keys"]["status"] == "pass"
    assert "from --maxtext-version" in checks["maxtext-config version"]["message"]
