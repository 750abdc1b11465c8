"""Write ``src/tpu_trainer/infra/gcluster_flags.yaml``: the flags of ``gcluster job submit``.

gcluster (Cluster Toolkit's CLI, Go) cannot be installed here, so the tool checks the
``gcluster job submit`` lines it writes against a model of the command's flags, built from the
cobra command files of a Cluster Toolkit checkout (``git show REV:cmd/job/{job,submit}.go``,
never built nor run):

- every ``SubmitCmd.Flags().<Kind>Var[P](&v, "name", "s", default, "help")`` and the
  ``JobCmd.PersistentFlags()`` the sub-commands inherit (``--cluster``, ``--location``,
  ``--project``): name, shorthand, value kind, default;
- ``MarkFlagRequired("name")``: the required flags;
- ``Allowed values: a, b, c.`` in a flag's help: its choices;
- ``len(workloadName) > N`` in the command's checks: the longest ``--name``;
- the image rules of ``validateImageSources`` (``--image`` or ``--base-image``; ``--build-context``
  with ``--base-image`` only), when their messages are in the source;
- the other sub-commands the tool runs (``cmd/job/{cancel,list,logs}.go``): the word after
  ``gcluster job`` (``Use:``), how many positional arguments they take (``cobra.ExactArgs(N)``),
  their own flags, and the choices a ``PreRunE`` check allows (``Allowed values are: ...``).

Flags that recipes pass but the checkout does not define (the revision the store holds may
predate the Cluster Toolkit the recipes pin) are listed with ``--assume NAME=KIND:EVIDENCE``;
they go into the file under ``assumed:`` with their evidence, and the parser reports them as
such rather than as defined.

Usage: ``python3 tools/build_gcluster_flags.py --git <cluster-toolkit git dir> --rev <rev>
[--assume ...] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "src" / "tpu_trainer" / "infra" / "gcluster_flags.yaml"
FILES = ("cmd/job/job.go", "cmd/job/submit.go")
SUB_FILES = ("cmd/job/cancel.go", "cmd/job/list.go", "cmd/job/logs.go")

_FLAG_TAIL = (
    r"\.(?P<scope>Flags|PersistentFlags)\(\)\."
    r"(?P<kind>[A-Za-z]+?)Var(?P<p>P?)\(\s*&[\w.]+,\s*\"(?P<name>[a-z0-9-]+)\",\s*"
    r"(?:\"(?P<short>[a-zA-Z]?)\",\s*)?(?P<default>\"[^\"]*\"|[^,]+),\s*\"(?P<help>(?:[^\"\\]|\\.)*)\"\s*\)"
)
_FLAG = re.compile(r"(?P<cmd>SubmitCmd|JobCmd)" + _FLAG_TAIL)
_COMMAND = re.compile(r"var (?P<var>\w+Cmd) = &cobra\.Command\{\s*Use:\s*\"(?P<use>[a-z]+)")
_EXACT_ARGS = re.compile(r"Args:\s*cobra\.ExactArgs\((\d+)\)")
_PRE_RUN_CHOICES = re.compile(
    r"invalid value for --([a-z0-9-]+): %s\. Allowed values are: ([A-Za-z, ]+)"
)
_REQUIRED = re.compile(r"SubmitCmd\.MarkFlagRequired\(\"([a-z0-9-]+)\"\)")
_NAME_MAX = re.compile(r"len\(workloadName\)\s*>\s*(\d+)")
_ALLOWED = re.compile(r"Allowed values:\s*([a-z0-9, -]+?)\.")
_KINDS = {
    "String": "string",
    "Int": "int",
    "Bool": "bool",
    "StringSlice": "string-list",
    "StringArray": "string-list",
    "IntSlice": "int-list",
    "StringToString": "key-value",
}
_IMAGE_RULES = {
    "either --image or --base-image must be provided": ("one_of", ["image", "base-image"]),
    "--build-context cannot be provided when --image is used": (
        "excludes",
        ["image", "build-context"],
    ),
    "a --build-context must be provided when --base-image is used": (
        "together",
        ["base-image", "build-context"],
    ),
}


def show(git: Path, rev: str, path: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git), "show", f"{rev}:{path}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git show {rev}:{path} failed: {done.stderr.strip()}")
    return done.stdout


def commit_of(git: Path, rev: str) -> tuple[str, str]:
    done = subprocess.run(
        ["git", "--git-dir", str(git), "log", "-1", "--format=%H %cs", rev],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    sha, date = done.stdout.split()
    return sha, date


def _default(raw: str, kind: str) -> object:
    raw = raw.strip()
    if raw.startswith('"'):
        return raw.strip('"')
    if kind == "bool":
        return raw == "true"
    if kind == "int" and re.fullmatch(r"-?\d+", raw):
        return int(raw)
    return None  # nil, []string{} and the like: no default


def flags_of(source: str, pattern: re.Pattern[str] = _FLAG) -> dict[str, dict[str, object]]:
    flags: dict[str, dict[str, object]] = {}
    for m in pattern.finditer(source):
        kind = _KINDS.get(m["kind"])
        if kind is None:
            raise SystemExit(f"unknown flag kind {m['kind']}Var for --{m['name']}")
        entry: dict[str, object] = {"kind": kind}
        if m["short"]:
            entry["short"] = m["short"]
        default = _default(m["default"], kind)
        if default not in (None, "", False):
            entry["default"] = default
        allowed = _ALLOWED.search(m["help"])
        if allowed:
            entry["choices"] = [c.strip() for c in allowed[1].split(",") if c.strip()]
        if m["cmd"] == "JobCmd":
            entry["inherited"] = True
        flags[m["name"]] = entry
    return dict(sorted(flags.items()))


def subcommand_of(source: str) -> tuple[str, dict[str, object]]:
    """One ``gcluster job`` sub-command's word, positional arguments and own flags."""
    found = _COMMAND.search(source)
    if found is None:
        raise SystemExit("no `var XCmd = &cobra.Command{Use: ...}` in the sub-command's file")
    flags = flags_of(source, re.compile(f"(?P<cmd>{re.escape(found['var'])})" + _FLAG_TAIL))
    for name, allowed in _PRE_RUN_CHOICES.findall(source):
        if name not in flags:
            raise SystemExit(f"{found['use']}: a check allows values of --{name}, not a flag")
        flags[name]["choices"] = [c.strip() for c in allowed.split(",") if c.strip()]
    entry: dict[str, object] = {}
    exact = _EXACT_ARGS.search(source)
    if exact:
        entry["args"] = int(exact[1])
    entry["flags"] = flags
    return found["use"], entry


def build(git: Path, rev: str, assumed: list[str]) -> dict[str, object]:
    source = "\n".join(show(git, rev, path) for path in FILES)
    flags = flags_of(source)
    for name in _REQUIRED.findall(source):
        flags[name]["required"] = True
    name_max = _NAME_MAX.search(source)
    rules = [
        {"rule": rule, "flags": names}
        for message, (rule, names) in _IMAGE_RULES.items()
        if message in source
    ]
    sha, date = commit_of(git, rev)
    doc: dict[str, object] = {
        "source": {"repository": "GoogleCloudPlatform/cluster-toolkit", "rev": rev},
        "commit": sha,
        "date": date,
        "files": [*FILES, *SUB_FILES],
        "command": ["gcluster", "job", "submit"],
        "name": {
            "max_length": int(name_max[1]) if name_max else None,
            "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$",
        },
        "flags": flags,
        "rules": rules,
        "subcommands": dict(sorted(subcommand_of(show(git, rev, path)) for path in SUB_FILES)),
    }
    extra: dict[str, dict[str, object]] = {}
    for item in assumed:
        name, _, rest = item.partition("=")
        kind, _, evidence = rest.partition(":")
        if kind not in _KINDS.values() or not evidence:
            raise SystemExit(f"--assume {item}: write NAME=KIND:EVIDENCE")
        if name in flags:
            raise SystemExit(f"--assume {name}: the source defines it")
        extra[name] = {"kind": kind, "evidence": evidence}
    if extra:
        doc["assumed"] = dict(sorted(extra.items()))
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--git", type=Path, required=True, help="a cluster-toolkit git directory")
    parser.add_argument("--rev", required=True, help="branch, tag or commit to read")
    parser.add_argument("--assume", action="append", default=[], help="NAME=KIND:EVIDENCE")
    parser.add_argument("--out", type=Path, default=OUT)
    options = parser.parse_args(argv)
    doc = build(options.git, options.rev, options.assume)
    header = (
        "# Written by tools/build_gcluster_flags.py from Cluster Toolkit's cmd/job sources;\n"
        "# do not edit by hand.\n"
    )
    options.out.write_text(header + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    flags = doc["flags"]
    print(
        f"{options.out}: {len(flags) if isinstance(flags, dict) else 0} flags from {doc['commit']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
