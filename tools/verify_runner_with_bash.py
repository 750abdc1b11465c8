"""Check the reading of MaxText benchmark-runner recipes against bash (for
``verify_recipes_with_bash.py``).

A Trillium script (or the fenced block of a v5p README that runs the runner) is run with bash in
a throw-away directory whose ``PATH`` starts with a stand-in ``python3``: it records its argv and
exits 0, so ``python3 -m benchmarks.benchmark_runner xpk --model_name=...`` hands it exactly the
words the real runner would get. Every variable the command refers to is set to
``filled-<NAME>``. The reader's view of the same command (subcommand, then each ``--option`` and
its value with references filled the same way) must equal that argv, option for option. The
recipe is then read whole (model at its pinned revision); a refusal is shown, not counted as a
difference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from sandbox_run import run_captured
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.recipes.benchmark_invocation import (
    RUNNER_MODULE,
    RUNNER_SCRIPT,
    find_invocation,
    mentions_runner,
)
from tpu_trainer.recipes.benchmark_recipe import benchmark_recipe

CAPTURE_VAR = "VERIFY_RUNNER_CAPTURE"
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_PYTHON_STAND_IN = """\
#!{python}
import json, os, sys
with open(os.environ["{capture}"], "a", encoding="utf-8") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""

Options = list[tuple[str, str]]


def runner_recipes(folder: Path) -> list[Path]:
    """Scripts (other than run_recipe.sh) and READMEs under ``folder`` that run the runner."""
    found = [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and ((p.suffix == ".sh" and p.name != "run_recipe.sh") or p.name == "README.md")
        and mentions_runner(p.read_text(encoding="utf-8", errors="replace"))
    ]
    return [p for p in found if p.suffix == ".sh" or _runner_block(p.read_text()) is not None]


def _runner_block(readme: str) -> str | None:
    return next((m.group(1) for m in _FENCE.finditer(readme) if mentions_runner(m.group(1))), None)


def make_bin(root: Path, python: str) -> Path:
    bin_dir = root / "runner-bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "python3"
    stand_in.write_text(_PYTHON_STAND_IN.format(python=python, capture=CAPTURE_VAR), "utf-8")
    stand_in.chmod(0o755)
    return bin_dir


def bash_options(
    text: str, bash: str, bin_dir: Path, work: Path, timeout: int
) -> tuple[str, Options]:
    """Run ``text`` with bash; the runner's subcommand and options as its argv holds them."""
    script = work / "command.sh"
    script.write_text(text, encoding="utf-8")
    capture = work / "python3-calls.jsonl"
    env = {name: f"filled-{name}" for name in set(_REF.findall(text))}
    env |= {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work), CAPTURE_VAR: str(capture)}
    run_captured([bash, str(script)], work, env, timeout)
    calls = capture.read_text(encoding="utf-8").splitlines() if capture.exists() else []
    argv = next((a for a in map(json.loads, calls) if _after_runner(a) is not None), None)
    if argv is None:
        raise ValueError("bash never ran the benchmark runner")
    return _split(_after_runner(argv) or [])


def _after_runner(argv: list[str]) -> list[str] | None:
    for i, word in enumerate(argv):
        if word == RUNNER_SCRIPT or (word == RUNNER_MODULE and i and argv[i - 1] == "-m"):
            return argv[i + 1 :]
    return None


def _split(words: list[str]) -> tuple[str, Options]:
    subcommand = words[0] if words and not words[0].startswith("-") else ""
    words = words[1:] if subcommand else words
    options: Options = []
    i = 0
    while i < len(words):
        name, eq, value = words[i].partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value, i = words[i + 1], i + 1
        options.append((name.removeprefix("--"), value))
        i += 1
    return subcommand, options


def reader_options(text: str, shown: str, markdown: bool) -> tuple[str, Options]:
    call = find_invocation(text, shown, markdown=markdown)
    fill: Callable[[re.Match[str]], str] = lambda m: f"filled-{m.group(1)}"  # noqa: E731
    options = [(k, _REF.sub(fill, v.text)) for k, v in call.options.items()]
    return call.subcommand, options


def check_runner_recipe(
    path: Path, shown: str, bash: str, bin_dir: Path, work: Path, timeout: int
) -> tuple[bool, str]:
    """Whether the reader's runner options equal bash's, and the line to print."""
    text = path.read_text(encoding="utf-8")
    markdown = path.suffix == ".md"
    command = _runner_block(text) if markdown else text
    try:
        by_bash = bash_options(command or "", bash, bin_dir, work, timeout)
    except (OSError, ValueError) as e:
        return False, f"ERROR {shown}: could not run under bash: {e}"
    try:
        by_reader = reader_options(text, shown, markdown)
    except TpuTrainerError as e:
        return False, f"MISMATCH {shown}: the reader refused the command: {e}"
    if by_reader != by_bash:
        return False, f"MISMATCH {shown}: reader={by_reader!r} bash={by_bash!r}"
    try:
        recipe = benchmark_recipe(path, text)
        outcome = f"reads as {recipe.arg_value('model_name')} on {recipe.device_type}"
        if recipe.problems:
            outcome += ", failing " + ", ".join(p.name for p in recipe.problems)
    except TpuTrainerError as e:
        outcome = f"refused: {e}".splitlines()[0]
    return True, f"OK {shown} ({len(by_bash[1])} runner options; {outcome})"
