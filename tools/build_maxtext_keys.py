"""Build ``frameworks/maxtext/data/maxtext_versions.yaml``: MaxText's configuration keys per version.

For each released ``maxtext`` wheel on PyPI (``pip download maxtext==X --no-deps``, read as a zip,
nothing installed or run) and for each branch, tag or commit of a MaxText git mirror
(``git show REV:PATH``, wherever ``base.yml`` lives at that revision), it reads ``base.yml``'s
top-level keys with the type of their default, the fields ``configs/types.py`` declares beyond
them (pydantic-era MaxText accepts those too; read as text), and the model file names, and
writes:

- the reference version (the runtime's, 0.2.5) in full, every other version as the keys it adds
  (or types differently) and removes against its neighbour towards the reference in date order,
  and its model files the same way;
- renames: a key one version has and a later one lacks, where the later one gained a key of the
  same words (``fsdp_shard_on_exp`` → ``shard_exp_on_fsdp``) or a close spelling, confirmed and
  dated by ``git log -S`` on the mirror when one is given.

Usage:
  python tools/build_maxtext_keys.py --mirror /path/to/maxtext.git \\
      --rev main --rev maxtext-tutorial-v1.5.0 --rev a0fceb5 [--pypi 0.2.5 ...] [--out FILE]
Without --pypi every version PyPI lists is read (its upload day dates it).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

REFERENCE = "0.2.5"
PYPI_JSON = "https://pypi.org/pypi/maxtext/json"
OUT = Path(__file__).resolve().parents[1] / (
    "src/tpu_trainer/frameworks/maxtext/data/maxtext_versions.yaml"
)
_FIELD = re.compile(r"^  ([a-z_][a-z0-9_]*)\s*:", re.MULTILINE)
_CONFIGS = re.compile(r"(?:^|/)configs/base\.yml$")
_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"))


@dataclass
class Table:
    name: str
    source: str
    """``pypi`` or ``git``."""
    revision: str
    date: str
    config: str
    keys: dict[str, str]
    models: list[str]


def kind(default: Any) -> str:
    """The type word of a base.yml default (``none`` for null: MaxText does not check those)."""
    if default is None or (isinstance(default, str) and default.lower() == "none"):
        return "none"
    for types, word in _KINDS:
        if isinstance(default, types):
            return word
    return "dict" if isinstance(default, dict) else "none"


def _keys(text: str) -> dict[str, str]:
    doc = yaml.safe_load(text) or {}
    return {str(k): kind(v) for k, v in doc.items()}


def _fields(source: str) -> set[str]:
    """Names ``configs/types.py`` declares on its pydantic classes (MaxText accepts a field of
    ``MaxTextConfig`` that ``base.yml`` does not list): annotated names one indent into a class,
    read as text (never imported; the file may use syntax newer than this Python)."""
    return set(_FIELD.findall(source)) - {"model_config"}  # pydantic's own settings


def _accepted(base_text: str, types_text: str | None) -> dict[str, str]:
    """base.yml's keys with their types, and the fields beyond it (type ``none``: unchecked)."""
    keys = _keys(base_text)
    extra = _fields(types_text) - set(keys) if types_text else set()
    return keys | dict.fromkeys(sorted(extra), "none")


def _base_path(names: list[str]) -> str:
    found = sorted((n for n in names if _CONFIGS.search(n) and "test" not in n), key=len)
    if not found:
        raise SystemExit("no configs/base.yml in the listing")
    return found[0]


def _models(names: list[str], base: str) -> list[str]:
    folder = base.rsplit("/", 1)[0] + "/models/"
    return sorted(n[len(folder) : -4] for n in names if n.startswith(folder) and n.endswith(".yml"))


def _run(argv: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-400:]}")
    return done.stdout


def pypi_releases() -> dict[str, str]:
    """Every released version and the day its first file was uploaded (PyPI's JSON API)."""
    with urllib.request.urlopen(PYPI_JSON, timeout=60) as answer:
        doc = json.load(answer)
    return {
        version: files[0]["upload_time"][:10]
        for version, files in doc["releases"].items()
        if files and not any(f.get("yanked") for f in files)
    }


def pypi_table(version: str, day: str, work: Path) -> Table:
    dest = work / version
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
          "--python-version", "3.12", "--dest", str(dest), f"maxtext=={version}"])  # fmt: skip
    wheel = next(dest.glob("maxtext-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        base = _base_path(names)
        types = base.replace("base.yml", "types.py")
        fields = zf.read(types).decode() if types in names else None
        return Table(version, "pypi", version, day, base,
                     _accepted(zf.read(base).decode(), fields), _models(names, base))  # fmt: skip


def git_table(mirror: Path, rev: str) -> Table:
    sha, day = _run(["git", "log", "-1", "--format=%H %cs", rev], mirror).split()
    names = _run(["git", "ls-tree", "-r", "--name-only", sha], mirror).splitlines()
    base = _base_path(names)
    text = _run(["git", "show", f"{sha}:{base}"], mirror)
    types = base.replace("base.yml", "types.py")
    fields = _run(["git", "show", f"{sha}:{types}"], mirror) if types in names else None
    return Table(rev, "git", sha, day, base, _accepted(text, fields), _models(names, base))


def _same_words(old: str, new_keys: set[str]) -> str | None:
    words = frozenset(old.split("_"))
    same = [k for k in sorted(new_keys) if frozenset(k.split("_")) == words]
    if same:
        return same[0]
    close = difflib.get_close_matches(old, sorted(new_keys), n=1, cutoff=0.85)
    return close[0] if close else None


def renames(tables: list[Table], mirror: Path | None) -> dict[str, dict[str, str]]:
    """Keys dropped between two versions (in date order) whose new name the later one gained."""
    ordered = sorted(tables, key=lambda t: t.date)
    paths = sorted({t.config for t in tables if t.source == "git"})
    out: dict[str, dict[str, str]] = {}
    for before, after in itertools.pairwise(ordered):
        gained = set(after.keys) - set(before.keys)
        for old in sorted(set(before.keys) - set(after.keys)):
            new = _same_words(old, gained)
            if new is None or old in out:
                continue
            entry = {"to": new, "after": before.name, "by": after.name}
            if mirror is not None and paths:
                log = _run(["git", "log", "-S", old, "--format=%h %cs", "-1", "--", *paths], mirror)
                if log.strip():
                    entry["commit"], entry["date"] = log.split()[:2]
            out[old] = entry
    return out


def _delta(t: Table, near: Table) -> dict[str, Any]:
    return {
        "against": near.name,
        "added": {k: v for k, v in sorted(t.keys.items()) if near.keys.get(k) != v},
        "removed": sorted(set(near.keys) - set(t.keys)),
        "models_added": sorted(set(t.models) - set(near.models)),
        "models_removed": sorted(set(near.models) - set(t.models)),
    }


def document(tables: list[Table], mirror: Path | None) -> dict[str, Any]:
    """The reference whole; each other version as its difference from its neighbour towards the
    reference in date order (a chain, so each step holds only what changed then)."""
    ordered = sorted(tables, key=lambda t: (t.date, t.name))
    at = next(i for i, t in enumerate(ordered) if t.name == REFERENCE)
    versions: dict[str, Any] = {}
    for i, t in enumerate(ordered):
        entry: dict[str, Any] = {"source": t.source, "revision": t.revision, "date": t.date,
                                 "config": t.config}  # fmt: skip
        if i == at:
            entry |= {"keys": dict(sorted(t.keys.items())), "models": t.models}
        else:
            entry |= _delta(t, ordered[i + 1 if i < at else i - 1])
        versions[t.name] = entry
    return {"reference": REFERENCE, "versions": versions, "renames": renames(tables, mirror)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pypi", action="append", help="a released version (default: all)")
    parser.add_argument("--rev", action="append", default=[], help="a branch, tag or commit")
    parser.add_argument("--mirror", type=Path, help="a MaxText git directory (bare is fine)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.rev and args.mirror is None:
        parser.error("--rev needs --mirror")
    releases = pypi_releases()
    versions = sorted(set(args.pypi or releases) | {REFERENCE})
    with tempfile.TemporaryDirectory() as work:
        tables = [pypi_table(v, releases[v], Path(work)) for v in versions]
    tables += [git_table(args.mirror, rev) for rev in args.rev]
    head = (
        f"# MaxText's configuration keys per version, written by tools/build_maxtext_keys.py on "
        f"{date.today().isoformat()}: do not edit by hand.\n"
        "# The reference version is whole; each other one is what it adds (or types differently)\n"
        "# and removes against the version it names. Types: bool int float str list dict none.\n"
    )
    doc = document(tables, args.mirror)
    body = yaml.safe_dump(doc, sort_keys=False, width=100, default_flow_style=None)
    args.out.write_text(head + body, encoding="utf-8")
    print(f"wrote {args.out}: {len(tables)} versions ({', '.join(t.name for t in tables)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
