"""Check the reading of README recipes that submit a training script against bash (for
``verify_recipes_with_bash.py``).

A README such as tpu-recipes' v5p Llama2-7B one sets variables in fenced blocks and runs
``xpk workload create ... --command "bash <script> RUN_NAME=$RUN_NAME ..."``. For every such
README (and, for a README with one block of settings per slice size, for every size) this

1. runs with bash, in a throw-away directory whose ``PATH`` starts with stand-ins, the README's
   assignment lines (the chosen size block's, not the others) and its xpk command: ``xpk`` and
   ``python3`` (for ``python3 xpk.py ...``) record their argv. Every variable the README uses
   without setting is ``filled-<NAME>``, and ``<placeholder>`` becomes ``filled-placeholder``.
   The reader's expansion of the same text must hand xpk exactly the same words;
2. runs the ``--command`` bash handed xpk with ``bash -c``, as the pod would, in a directory
   holding the scripts the reader followed (the MaxText scripts at the revision it reads the
   README at, the recipe's own ``scripts/``) with stand-ins for ``python``/``python3`` (they
   record their argv and environment), ``git`` (``clone`` makes the folder), ``pip`` and
   ``gcloud``; scripts it runs but the tool does not follow (``preflight.sh``) are empty. The
   reader's training program (interpreter, program, config, arguments, in order) must equal
   the one bash ran, and every variable the reader exports must have, in the program's
   environment, the value the reader gives it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sandbox_run import run_captured
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.recipes.recipe import StepKind
from tpu_trainer.recipes.script_eval import PodStep, ScriptRun, evaluate
from tpu_trainer.recipes.script_files import RecipeFiles
from tpu_trainer.recipes.script_readme import (
    ScriptReadme,
    find_script_readme,
    flag_pairs,
    mentions_script_command,
    submission,
)
from tpu_trainer.recipes.script_recipe import pod_run
from tpu_trainer.recipes.script_words import Scope

CAPTURE_VAR = "VERIFY_SCRIPTS_CAPTURE"
_PLACEHOLDER = re.compile(r"<([A-Za-z][A-Za-z0-9_.-]*)>")
_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_RECORDER = """\
#!{python}
import json, os, sys
with open(os.environ["{capture}"], "a", encoding="utf-8") as f:
    f.write(json.dumps({{"argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
                        "env": dict(os.environ)}}) + "\\n")
"""
_GIT = """\
#!/bin/sh
if [ "$1" = clone ]; then
  for last in "$@"; do :; done
  name=$(basename "$last" .git)
  mkdir -p "$name"
fi
exit 0
"""
_OTHERS = {"pip": "exit 0", "gcloud": "exit 0", "gsutil": "exit 0", "sudo": "exit 0"}


@dataclass(frozen=True)
class Sandbox:
    bash: str
    python: str
    prefix: list[str]
    timeout: int


def script_readmes(folder: Path) -> list[Path]:
    """READMEs under ``folder`` that submit a training script."""
    return [
        p
        for p in sorted(folder.rglob("README.md"))
        if mentions_script_command(p.read_text(encoding="utf-8", errors="replace"))
        and find_script_readme(p.read_text(encoding="utf-8"), str(p)) is not None
    ]


def _bin(root: Path, sandbox: Sandbox) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    recorder = _RECORDER.format(python=sandbox.python, capture=CAPTURE_VAR)
    for name, body in {"xpk": recorder, "python3": recorder, "python": recorder}.items():
        (bin_dir / name).write_text(body, encoding="utf-8")
    (bin_dir / "git").write_text(_GIT, encoding="utf-8")
    for name, body in _OTHERS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def _run_bash(
    argv: list[str], cwd: Path, env: dict[str, str], sandbox: Sandbox
) -> list[dict[str, object]]:
    capture = Path(env[CAPTURE_VAR])
    capture.unlink(missing_ok=True)
    code, _, err = run_captured([*sandbox.prefix, sandbox.bash, *argv], cwd, env, sandbox.timeout)
    if code != 0:
        raise ValueError(f"bash exited with {code}: {err.strip()[-300:]}")
    lines = capture.read_text(encoding="utf-8").splitlines() if capture.exists() else []
    return [json.loads(line) for line in lines]


def _readme_lines(text: str, readme: ScriptReadme, size: str | None) -> str:
    """The README's assignment lines (the chosen size block's) and its xpk command."""
    lines = text.splitlines()
    sizes = readme.sizes()
    chosen = size or (sizes[0] if sizes else None)
    keep: list[str] = []
    for block in readme.blocks:
        if sizes and block.size() not in (None, chosen):
            continue
        keep += [lines[n - 1] for n in sorted({a.line for a in block.assignments})]
    n = readme.line - 1
    while True:
        keep.append(lines[n])
        if not lines[n].rstrip().endswith("\\"):
            break
        n += 1
    return "\n".join(keep) + "\n"


def check_submission(
    path: Path, size: str | None, root: Path, sandbox: Sandbox
) -> tuple[list[str], str]:
    """Bash's and the reader's xpk argv must agree; returns it and the ``--command``."""
    text = _PLACEHOLDER.sub(lambda m: f"filled-{m.group(1)}", path.read_text(encoding="utf-8"))
    readme = find_script_readme(text, str(path))
    if readme is None:
        raise ValueError("no xpk command running a script")
    script = _readme_lines(text, readme, size)
    bin_dir = _bin(root, sandbox)
    given = {n: f"filled-{n}" for n in set(_REFERENCE.findall(script))}
    env = given | {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(root),
        "USER": "test_user",
        CAPTURE_VAR: str(root / "calls.jsonl"),
    }
    (root / "readme.sh").write_text(script, encoding="utf-8")
    calls = _run_bash([str(root / "readme.sh")], root, env, sandbox)
    xpk = [c for c in calls if _is_xpk(c)]
    if len(xpk) != 1:
        raise ValueError(f"the README called xpk {len(xpk)} times")
    recorded = xpk[0]["argv"]
    argv = [str(a) for a in recorded] if isinstance(recorded, list) else []
    by_bash = argv[argv.index("create") + 1 :]
    scope = Scope(values={k: v for k, v in env.items() if k != CAPTURE_VAR})
    by_reader = list(submission(readme, scope, {}, size).argv)
    if by_reader != by_bash:
        raise MismatchError(f"xpk argv reader={by_reader!r} bash={by_bash!r}")
    command = dict(flag_pairs(by_bash)).get("--command") or ""
    return by_bash, command


def _is_xpk(call: dict[str, object]) -> bool:
    argv = call.get("argv")
    if not isinstance(argv, list) or not argv:
        return False
    return argv[0] == "xpk" or (len(argv) > 1 and str(argv[1]).endswith("xpk.py"))


class MismatchError(ValueError):
    """The reader and bash disagree."""


def _materialize(run: ScriptRun, files: RecipeFiles, pod: Path) -> None:
    """The scripts the reader followed, empty ones for scripts it leaves to the pod, and the
    folders ``cd`` goes into."""
    for path, _ in run.scripts:
        found = files.script(path)
        target = pod / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(found[0] if found else "", encoding="utf-8")
        target.chmod(0o755)
    for step in run.steps:
        head = step.words[:2]
        where = pod / step.cwd
        if step.kind is StepKind.SETUP and len(head) == 2 and head[0] in ("bash", "sh"):
            (where / head[1]).parent.mkdir(parents=True, exist_ok=True)
            if not (where / head[1]).exists():
                (where / head[1]).write_text("exit 0\n", encoding="utf-8")
        if step.kind is StepKind.SETUP and head[:1] == ("cd",) and len(head) == 2:
            (where / head[1]).mkdir(parents=True, exist_ok=True)


def _final_exports(steps: tuple[PodStep, ...]) -> dict[str, str]:
    return {s.words[0]: s.words[1] for s in steps if s.kind is StepKind.EXPORT}


def check_pod(
    path: Path, size: str | None, command: str, root: Path, sandbox: Sandbox
) -> tuple[int, int]:
    """Bash's training program and environment against the reader's; returns the numbers of
    arguments and exports compared."""
    variables = {"TPU_TYPE": size} if size else None
    revision = pod_run(path, path.read_text(encoding="utf-8"), variables).revision
    files = RecipeFiles(path.parent, revision)
    run = evaluate(command, files, f"{path}: --command")
    pod = root / "pod"
    pod.mkdir(exist_ok=True)
    _materialize(run, files, pod)
    bin_dir = _bin(root, sandbox)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(root),
        CAPTURE_VAR: str(root / "pod-calls.jsonl"),
    }
    calls = _run_bash(["-c", command], pod, env, sandbox)
    programs = [c for c in calls if not _is_xpk(c)]
    entries = [s for s in run.steps if s.kind is StepKind.ENTRY]
    if not programs or not entries:
        raise ValueError(f"bash ran {len(programs)} python programs, the reader {len(entries)}")
    ran = programs[-1]
    words = list(entries[-1].words)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)  # NAME=value prefixes: compared as environment below
    if words != ran["argv"]:
        raise MismatchError(f"program reader={words!r} bash={ran['argv']!r}")
    exports = _final_exports(run.steps)
    got = ran["env"]
    assert isinstance(got, dict)
    wrong = {k: (v, got.get(k)) for k, v in exports.items() if got.get(k) != v}
    if wrong:
        raise MismatchError(f"environment (reader, bash): {wrong!r}")
    return len(words), len(exports)


def check_script_readme(
    path: Path, shown: str, root: Path, sandbox: Sandbox
) -> list[tuple[bool, str]]:
    """One line per size block: whether the reader agrees with bash."""
    text = path.read_text(encoding="utf-8")
    readme = find_script_readme(text, str(path))
    sizes: list[str | None] = [*(readme.sizes() if readme else [])] or [None]
    out: list[tuple[bool, str]] = []
    for n, size in enumerate(sizes):
        label = f"{shown}" + (f" [TPU_TYPE={size}]" if size else "")
        work = root / f"size-{n}"
        work.mkdir()
        try:
            argv, command = check_submission(path, size, work, sandbox)
            args, exports = check_pod(path, size, command, work, sandbox)
        except MismatchError as e:
            out.append((False, f"MISMATCH {label}: {e}"))
            continue
        except (OSError, ValueError, TpuTrainerError) as e:
            out.append((False, f"ERROR {label}: {str(e).splitlines()[0]}"))
            continue
        out.append(
            (True, f"OK {label} ({len(argv)} xpk words, {args} program words, {exports} exports)")
        )
    return out
