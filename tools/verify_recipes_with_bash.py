"""Check the recipe reader against bash itself.

``tpu_trainer.recipes.reader.parse_recipe`` reads a tpu-recipes ``run_recipe.sh`` without running
it: it follows quoting, line continuations and variable expansion on its own. This script
checks that reading against the real thing. For every ``run_recipe.sh`` under a folder it

1. runs the script with ``bash`` in a throw-away directory whose ``PATH`` starts with
   stand-ins: ``xpk`` and ``gcluster`` (Cluster Toolkit recipes, ``cluster_toolkit/run_recipe.sh``)
   record their argv and environment and exit 0; ``pip``, ``gsutil`` and
   ``gcloud`` exit 0; ``date`` prints a fixed string. ``HOME`` holds an empty
   ``.local/bin/venv/bin/activate`` so the recipe's ``source`` works, and ``USER`` is fixed.
   When the kernel allows it the run also gets a network namespace of its own
   (``unshare --net``), so nothing can reach the network even by accident;
2. takes from the recorded argv what bash actually passed to xpk (``workload create``) or
   gcluster (``job submit``): every ``--flag[=value]``, the device type (gcluster's
   ``--compute-type`` with ``--topology``), and the ``--command`` string, which it splits as the
   pod's shell would
   (``shlex`` in POSIX mode with operators as separate tokens; a command that is only
   ``bash -c '<script>'`` is split once more, as the inner bash reads its script) to find the
   value of ``LIBTPU_INIT_ARGS`` and every training program, ``python3 [-u] -m <module>
   <base>.yml`` or ``python3 [-u] <dir>/train.py <base>.yml``, with its arguments (both branches
   of an ``if``/``else`` that picks one);
3. fills the reader's symbolic ``${NAME}`` references with the values of the variables xpk
   saw exported (names it did not see, like ``${TPU_WORKER_ID}``, stay as they are) and
   compares XLA flags and program arguments (in order), the entry module and base config,
   the device type, and the set of xpk flags other than ``--command``. A Cluster Toolkit
   recipe whose argument loop takes ``--dry-run`` is run a second time with each dry-run form
   the reader found (``--dry-run``, ``--dry-run-out FILE``, ``--dry-run-out=FILE``): gcluster
   must then receive exactly the same flags plus that dry-run flag.

``<your-gcs-bucket-path>``-style placeholders are kept literal on both sides: the author means
"fill this in", even though a real pod's shell would read the ``<`` as a redirection.

A recipe that takes a value from the user's environment and checks it before it submits
(``export PROJECT_ID="${PROJECT_ID:-}"``, then a ``for`` loop over the names) is given
``gs://filled-<NAME>`` for each such variable.

The recipes ship with ``export PROJECT_ID=""`` and the like, so by default most references
expand to the empty string on both sides and a misplaced one would go unnoticed.
``--fill-exports`` gives each such variable a distinct value (``filled-PROJECT_ID``) in the copy
bash runs; the reader still reads the original.

Scripts and READMEs that run MaxText's benchmark runner (Trillium, v5p) are checked too, by
``verify_runner_with_bash``: bash runs the command with a stand-in ``python3`` and the runner's
argv must equal the reader's options. READMEs that submit a training script (``--command "bash
<script> ..."``, v5p) are checked by ``verify_scripts_with_bash``: bash runs the README's
assignments and xpk command with a stand-in ``xpk``, then the ``--command`` it got with the
scripts the reader followed and a stand-in ``python3``; xpk's argv, the training program's argv
and its environment must equal the reader's (every per-size block of a README separately).

Usage: ``python3 tools/verify_recipes_with_bash.py [--fill-exports] <folder>``. Prints one line
per recipe and a summary, and exits 1 when any recipe differs or could not be checked.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from sandbox_run import run_captured  # noqa: E402
from tpu_trainer.errors import RecipeError  # noqa: E402
from tpu_trainer.recipes.cluster_toolkit import (  # noqa: E402
    looks_like_cluster_toolkit,
    parse_cluster_toolkit_recipe,
)
from tpu_trainer.recipes.pod_steps import entry_point  # noqa: E402
from tpu_trainer.recipes.reader import parse_recipe  # noqa: E402
from tpu_trainer.recipes.recipe import Recipe, StepKind, gcluster_device_type  # noqa: E402
from verify_runner_with_bash import check_runner_recipe, make_bin, runner_recipes  # noqa: E402
from verify_scripts_with_bash import (  # noqa: E402
    Sandbox as ScriptSandbox,
)
from verify_scripts_with_bash import (  # noqa: E402
    check_script_readme,
    script_readmes,
)
from verify_views import Flag, View, differences  # noqa: E402

FIXED_DATE = "20261122-0600"
TEST_USER = "test_user"
TIMEOUT_S = 30
CAPTURE_VAR = "VERIFY_RECIPES_XPK_CAPTURE"

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>")
_PH_OPEN, _PH_CLOSE = "\x03", "\x04"
_PUNCTUATION = frozenset("();<>|&")
_PYTHON = re.compile(r"(?:.*/)?python3?(?:\.\d+)?")
_YAML = re.compile(r"\.ya?ml$")
_EMPTY_EXPORT = re.compile(r'^(\s*export\s+)([A-Za-z_][A-Za-z0-9_]*)=""', re.MULTILINE)
_LEFT_TO_USER = re.compile(r'^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)="\$\{\1:-\}"', re.MULTILINE)
"""``export NAME="${NAME:-}"``: a value the recipe takes from the user's environment (and
checks before it submits), so bash is given one: ``gs://filled-NAME``."""

_XPK_STAND_IN = """\
#!{python}
import json, os, sys
with open(os.environ["{capture}"], "a", encoding="utf-8") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}) + "\\n")
"""
SUBMITTERS = {"xpk": ["workload", "create"], "gcluster": ["job", "submit"]}
DRY_RUN_FILE = "manifest.yaml"
_SH_STAND_INS = {
    "pip": "exit 0",
    "gsutil": "exit 0",
    "gcloud": "exit 0",
    "date": f"echo {FIXED_DATE}",
}


class HarnessError(Exception):
    """The recipe could not be run or its xpk call could not be understood."""


@dataclass(frozen=True)
class XpkCall:
    argv: list[str]
    env: dict[str, str]


# ---- running the recipe --------------------------------------------------------------


@dataclass(frozen=True)
class Sandbox:
    bin_dir: Path
    home: Path
    prefix: list[str]
    """Command that isolates the run from the network (empty when unavailable)."""
    bash: str
    fill_exports: bool
    """Give ``export NAME=""`` lines a distinct value in the copy bash runs."""


def make_sandbox(root: Path, fill_exports: bool) -> Sandbox:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    xpk = _XPK_STAND_IN.format(python=sys.executable, capture=CAPTURE_VAR)
    for submitter in SUBMITTERS:
        (bin_dir / submitter).write_text(xpk, encoding="utf-8")
    for name, body in _SH_STAND_INS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    home = root / "home"
    activate = home / ".local" / "bin" / "venv" / "bin" / "activate"
    activate.parent.mkdir(parents=True)
    activate.touch()
    bash = shutil.which("bash")
    if bash is None:
        raise HarnessError("bash not found")
    return Sandbox(bin_dir, home, network_isolation(), bash, fill_exports)


def network_isolation() -> list[str]:
    """``unshare`` with a private network namespace when it works here, else nothing."""
    unshare = shutil.which("unshare")
    if unshare is not None:
        prefix = [unshare, "--net", "--map-root-user"]
        probe = subprocess.run(
            [*prefix, "true"], capture_output=True, timeout=TIMEOUT_S, check=False
        )
        if probe.returncode == 0:
            return prefix
    print(
        "note: no network namespace available; relying on the stand-ins alone",
        file=sys.stderr,
    )
    return []


def run_in_bash(script: Path, sandbox: Sandbox, work: Path, args: tuple[str, ...] = ()) -> XpkCall:
    """Run a copy of ``script`` (with ``args``) with bash in ``work`` and return the one xpk or
    gcluster call it made."""
    copy = work / "run_recipe.sh"
    text = script.read_text(encoding="utf-8")
    if sandbox.fill_exports:
        text = _EMPTY_EXPORT.sub(lambda m: f'{m.group(1)}{m.group(2)}="filled-{m.group(2)}"', text)
    copy.write_text(text, encoding="utf-8")
    capture = work / "xpk-calls.jsonl"
    env = {
        **{name: f"gs://filled-{name}" for name in _LEFT_TO_USER.findall(text)},
        "PATH": f"{sandbox.bin_dir}:/usr/bin:/bin",
        "HOME": str(sandbox.home),
        "USER": TEST_USER,
        CAPTURE_VAR: str(capture),
    }
    capture.unlink(missing_ok=True)
    argv = [*sandbox.prefix, sandbox.bash, str(copy), *args]
    code, _, stderr = run_captured(argv, work, env, TIMEOUT_S)
    if code != 0:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        raise HarnessError(f"bash exited with {code}" + (f": {tail}" if tail else ""))
    return read_capture(capture)


def read_capture(capture: Path) -> XpkCall:
    if not capture.exists():
        raise HarnessError("the script never called xpk nor gcluster")
    lines = capture.read_text(encoding="utf-8").splitlines()
    if len(lines) != 1:
        raise HarnessError(f"the script called its submitter {len(lines)} times")
    record = json.loads(lines[0])
    argv, env = record.get("argv"), record.get("env")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise HarnessError("malformed xpk capture (argv)")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise HarnessError("malformed xpk capture (env)")
    return XpkCall([str(a) for a in argv], {str(k): str(v) for k, v in env.items()})


# ---- what bash passed ------------------------------------------------------------------


def parse_xpk_argv(argv: list[str]) -> list[Flag]:
    """``--name=value``, ``--name value`` and ``--switch``, the way the reader pairs them.

    A stray word (say, from an unquoted value that bash split) is kept as ``(word, None)`` so
    that it shows up in the comparison.
    """
    if argv[:2] not in SUBMITTERS.values():
        raise HarnessError(f"the submitter was called as `{' '.join(argv[:2])}`")
    words = argv[2:]
    flags: list[Flag] = []
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            flags.append((word, None))
            i += 1
            continue
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value, eq = words[i + 1], "="
            i += 1
        flags.append((name, value if eq else None))
        i += 1
    return flags


def split_pod_command(command: str) -> list[str]:
    """Words and operators of ``command`` as a POSIX shell reads them, placeholders kept."""
    protected = _PLACEHOLDER.sub(lambda m: _PH_OPEN + m.group(1) + _PH_CLOSE, command)
    lexer = shlex.shlex(protected, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return [tok.replace(_PH_OPEN, "<").replace(_PH_CLOSE, ">") for tok in lexer]


def is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _PUNCTUATION


def find_entries(tokens: list[str]) -> list[tuple[str, str, list[str]]]:
    """Module (or script), base config and arguments of every ``python3 [-u] -m <module>
    <base>.yml <args...>`` and ``python3 [-u] <dir>/train.py <base>.yml <args...>``; the
    arguments end at an operator or a redirection (``2>&1``)."""
    found: list[tuple[str, str, list[str]]] = []
    for i, tok in enumerate(tokens):
        if not _PYTHON.fullmatch(tok):
            continue
        j = i + 1
        while j < len(tokens) and tokens[j] == "-u":
            j += 1
        if tokens[j : j + 1] == ["-m"]:
            j += 1
        elif not "".join(tokens[j : j + 1]).endswith("/train.py"):
            continue
        if j + 1 >= len(tokens) or not _YAML.search(tokens[j + 1]):
            continue
        args: list[str] = []
        for k in range(j + 2, len(tokens)):
            arg = tokens[k]
            redirect = arg.isdigit() and tokens[k + 1 : k + 2] in ([">&"], [">"], [">>"])
            if is_operator(arg) or redirect:
                break
            args.append(arg)
        found.append((tokens[j], tokens[j + 1], args))
    if not found:
        raise HarnessError("no `python3 -m <module> <base>.yml` in --command")
    return found


def pod_tokens(command: str) -> list[str]:
    """The pod command's words; a command that is only ``bash -c '<script>'`` is its script
    (the pod runs the command with bash already)."""
    tokens = split_pod_command(command)
    if len(tokens) == 3 and tokens[0] in ("bash", "/bin/bash") and tokens[1] == "-c":
        return split_pod_command(tokens[2])
    return tokens


def bash_view(call: XpkCall) -> View:
    flags = parse_xpk_argv(call.argv)
    commands = [value for name, value in flags if name == "--command"]
    if len(commands) != 1 or commands[0] is None:
        raise HarnessError(f"expected one --command=..., found {len(commands)}")
    tokens = pod_tokens(commands[0])
    xla: list[str] = []
    for tok in tokens:
        if tok.startswith("LIBTPU_INIT_ARGS="):
            xla = tok.partition("=")[2].split()
            break
    entries = find_entries(tokens)
    module, base, args = entries[-1]
    devices = [v for n, v in flags if n in ("--device-type", "--tpu-type")]
    compute = dict(flags).get("--compute-type")
    if not devices and compute is not None:
        devices = [gcluster_device_type(compute, dict(flags).get("--topology"))]
    return View(
        device_type=devices[0] if devices else None,
        flags=frozenset(f for f in flags if f[0] != "--command"),
        xla_flags=xla,
        module=module,
        base_config=base,
        program_args=args,
        entries=tuple((m, b, tuple(a)) for m, b, a in entries),
    )


# ---- what the reader says ---------------------------------------------------------------


def expand(text: str, env: dict[str, str]) -> str:
    """Fill ``${NAME}`` from ``env`` (one pass, values not re-expanded); unknown names stay."""
    return _REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def reader_view(recipe: Recipe, env: dict[str, str]) -> View:
    flags = frozenset(
        (f.name, None if f.value is None else expand(f.value, env))
        for f in recipe.xpk_flags
        if f.name != "--command"
    )
    base = recipe.entry.base_config
    entries = [entry_point(s.words) for s in recipe.steps if s.kind is StepKind.ENTRY]
    return View(
        device_type=expand(recipe.device_type, env),
        flags=flags,
        xla_flags=[expand(x, env) for x in recipe.xla_flags],
        module=expand(recipe.entry.module, env),
        base_config=None if base is None else expand(base, env),
        program_args=[expand(a, env) for a in recipe.program_args],
        entries=tuple(
            (
                expand(e.module, env),
                None if e.base_config is None else expand(e.base_config, env),
                tuple(expand(w.render(), env) for w in e.args),
            )
            for e in entries
        ),
    )


def dry_run_forms(recipe: Recipe) -> list[tuple[tuple[str, ...], Flag]]:
    """The script arguments to try for each dry-run form the reader found, and the flag
    gcluster must then receive."""
    forms = {
        "--dry-run": (("--dry-run",), ("--dry-run", None)),
        "--dry-run-out": (("--dry-run-out", DRY_RUN_FILE), ("--dry-run-out", DRY_RUN_FILE)),
        "--dry-run-out=*": ((f"--dry-run-out={DRY_RUN_FILE}",), ("--dry-run-out", DRY_RUN_FILE)),
    }
    return [forms[d] for d in recipe.dry_run if d in forms]


def dry_run_differences(
    script: Path, recipe: Recipe, sandbox: Sandbox, work: Path, plain: View
) -> list[str]:
    """Run the script again with each dry-run form: gcluster gets the same flags plus it."""
    found: list[str] = []
    for args, flag in dry_run_forms(recipe):
        bash = bash_view(run_in_bash(script, sandbox, work, args))
        if bash.flags != plain.flags | {flag}:
            got = sorted(bash.flags ^ plain.flags, key=str)
            found.append(f"with {' '.join(args)}: gcluster's flags changed by {got}, not {flag}")
    return found


def check_recipe(script: Path, shown: str, sandbox: Sandbox, work: Path) -> tuple[bool, str]:
    """Return whether the reader agrees with bash, and the line to print."""
    try:
        call = run_in_bash(script, sandbox, work)
        bash = bash_view(call)
    except (HarnessError, OSError, ValueError) as e:
        return False, f"ERROR {shown}: could not run under bash: {e}"
    text = script.read_text(encoding="utf-8")
    parse = parse_cluster_toolkit_recipe if looks_like_cluster_toolkit(text) else parse_recipe
    try:
        recipe = parse(text, shown)
    except RecipeError as e:
        return False, f"MISMATCH {shown}: the reader refused it: {e}"
    found = differences(reader_view(recipe, call.env), bash)
    try:
        found += dry_run_differences(script, recipe, sandbox, work, bash)
    except (HarnessError, OSError, ValueError) as e:
        return False, f"ERROR {shown}: could not run under bash with a dry-run argument: {e}"
    if found:
        return False, f"MISMATCH {shown}: " + "; ".join(found)
    tried = len(dry_run_forms(recipe))
    extra = f", {tried} dry-run forms" if tried else ""
    return True, (
        f"OK {shown} ({len(bash.xla_flags)} XLA flags, {len(bash.program_args)} args{extra})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "folder", type=Path, help="searched for run_recipe.sh and benchmark_runner recipes"
    )
    parser.add_argument(
        "--fill-exports",
        action="store_true",
        help='give each `export NAME=""` a distinct value in the copy bash runs, so a '
        "reference the reader misplaces cannot hide behind an empty string",
    )
    options = parser.parse_args(argv)
    folder: Path = options.folder
    scripts = sorted(folder.rglob("run_recipe.sh"))
    runner = runner_recipes(folder)
    readmes = script_readmes(folder)
    if not scripts and not runner and not readmes:
        print(f"no run_recipe.sh nor benchmark_runner recipe under {folder}", file=sys.stderr)
        return 2
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="verify-recipes-") as tmp:
        sandbox = make_sandbox(Path(tmp), options.fill_exports)
        for n, script in enumerate(scripts):
            work = Path(tmp) / f"run-{n}"
            work.mkdir()
            ok, line = check_recipe(script, str(script.relative_to(folder)), sandbox, work)
            print(line)
            passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
        runner_bin = make_bin(Path(tmp), sys.executable)
        for n, path in enumerate(runner):
            work = Path(tmp) / f"runner-{n}"
            work.mkdir()
            shown = str(path.relative_to(folder))
            ok, line = check_runner_recipe(path, shown, sandbox.bash, runner_bin, work, TIMEOUT_S)
            print(line)
            passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
        readme_sandbox = ScriptSandbox(sandbox.bash, sys.executable, sandbox.prefix, TIMEOUT_S)
        for n, path in enumerate(readmes):
            work = Path(tmp) / f"readme-{n}"
            work.mkdir()
            shown = str(path.relative_to(folder))
            for ok, line in check_script_readme(path, shown, work, readme_sandbox):
                print(line)
                passed, failed = (passed + 1, failed) if ok else (passed, failed + 1)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
