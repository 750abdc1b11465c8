"""Write ``src/tpu_trainer/recipes/data/benchmark_models.yaml`` from a MaxText git mirror.

Trillium (v6e) and v5p recipes of tpu-recipes run ``python3 -m benchmarks.benchmark_runner xpk
--model_name=NAME ...`` from a MaxText checkout at a pinned revision. ``benchmarks/`` is not part
of MaxText's wheel, so what the runner does with a model name is recorded here, per revision:

* every model the runner can find by name (``maxtext_trillium_model_configs.py`` and, where it
  exists, ``maxtext_v5p_model_configs.py``): its MaxText ``model_name`` (the model type), its
  tuning parameters as the text MaxText receives (``f"{key}={value}"``), and its XLA flags with
  every ``xla_flags_library`` constant and helper resolved;
* the runner's own defaults (``argparse`` defaults of ``benchmark_runner.py``, or the values the
  oldest revisions hard-code) and the pod command ``maxtext_xpk_runner.build_user_command``
  writes for a plain xpk run (no Pathways, no HLO dump, no metrics upload): its exports, entry,
  argument order and libtpu install step.

The sources are read with ``git show`` and ``ast``; nothing from MaxText is imported or run.

Usage: ``python3 tools/build_benchmark_models.py --maxtext MIRROR [--rev REV ...] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark_source_eval import Model, evaluate, models_of

OUT = Path(__file__).resolve().parents[1] / "src/tpu_trainer/recipes/data/benchmark_models.yaml"
# The revisions tpu-recipes' Trillium and v5p READMEs pin (`git checkout <rev>` or
# ``[maxtext](...)@<sha>``).
REVISIONS = (
    "tpu-recipes-v0.1.2",
    "tpu-recipes-v0.1.3",
    "tpu-recipes-v0.1.4",
    "tpu-recipes-v0.1.5",
    "e7292a3a572792a0d797fc8977b21d0f255729f1",
    "261a8be0fc5e909ef9da0521df62549e650ebb79",
    "3eb77db3c94580f56f1b738f8d254b03bd205e35",
    # Not pinned by any recipe: the first main revision with `mixtral_8x22b_dropped` (merged
    # 2025-02-12), the model the Mixtral-8x22B scripts name while pinning 261a8be0, which
    # predates it. Those recipes are planned here, with the mismatch reported as a check.
    "0bba3cf961abdce3ab94becb77888f9f53938181",
)
GLOBALS = {"MAXTEXT_PKG_DIR": "MaxText", "MAXTEXT_ASSETS_ROOT": "MaxText/assets"}
"""``benchmarks/globals.py`` on the submitting machine with no MAXTEXT_* variables set."""
# What build_user_command's helper variables hold on a plain xpk run.
_PLAIN_RUN = {
    "hlo_dump": "",
    "upload_hlo_dump": "",
    "enable_metrics_cmd": "",
    "install_libtpu_cmd": "",
}
_OPTIONS = (
    "num_slices",
    "num_steps",
    "priority",
    "max_restarts",
    "base_docker_image",
    "libtpu_version",
    "libtpu_type",
)


def git_show(mirror: Path, rev: str, path: str) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(mirror), "show", f"{rev}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def commit_of(mirror: Path, rev: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(mirror), "rev-parse", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def date_of(mirror: Path, rev: str) -> str:
    """The commit's date (``YYYY-MM-DD``, committer time): which revision came first."""
    done = subprocess.run(
        ["git", "-C", str(mirror), "log", "-1", "--format=%cs", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def arg_text(value: Any) -> str:
    """A tuning value as the runner writes it into the command (``f"{key}={value}"``)."""
    return str(value)


def model_entry(model: Model, source: str) -> dict[str, Any]:
    return {
        "model_name": model.model_name,
        "model_type": model.model_type,
        "source": source,
        "tuning_params": {k: arg_text(v) for k, v in model.tuning_params.items()},
        "xla_flags": " ".join(model.xla_flags.split()),
    }


def read_models(mirror: Path, rev: str) -> dict[str, dict[str, Any]]:
    flags_text = git_show(mirror, rev, "benchmarks/xla_flags_library.py") or ""
    flags = evaluate(flags_text, f"{rev}:xla_flags_library.py", {}, {})
    modules = {"xla_flags_library": flags}
    out: dict[str, dict[str, Any]] = {}
    for family, registry in (("trillium", "trillium_model_dict"), ("v5p", "v5p_model_dict")):
        path = f"benchmarks/maxtext_{family}_model_configs.py"
        text = git_show(mirror, rev, path)
        if text is None:
            continue
        namespace = evaluate(text, f"{rev}:{path}", modules, GLOBALS)
        for name, model in models_of(namespace, registry).items():
            out.setdefault(name, model_entry(model, family))
    return dict(sorted(out.items()))


# ---- the runner ---------------------------------------------------------------------------
def _literal(node: ast.expr | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def argparse_defaults(tree: ast.Module) -> dict[str, Any]:
    """``--name`` → default of the xpk runner's arguments (the first definition of each)."""
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("add_argument")):
            continue
        if not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        name = str(node.args[0].value).removeprefix("--")
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        out.setdefault(name, _literal(default))
    return out


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None
    )


def _constant_assignments(func: ast.FunctionDef) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out.setdefault(target.id, []).append(node.value.value)
    return out


def _render(node: ast.expr, known: dict[str, str]) -> str:
    """A string expression as text; ``{expr}`` for what only runs know, ``known`` filled in."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(v, known) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        text = ast.unparse(node.value)
        return known.get(text, "{" + text + "}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left, known) + _render(node.right, known)
    if isinstance(node, ast.IfExp):
        return _render(node.body, known)  # `... if not is_pw_enabled else ''`
    if isinstance(node, ast.List | ast.Tuple):
        return " ".join(_render(e, known) for e in node.elts)
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(".join") and node.args:
        return _render(node.args[0], known)
    return "{" + ast.unparse(node) + "}"


def _command_text(func: ast.FunctionDef, known: dict[str, str]) -> str:
    command = next(
        (
            n.value
            for n in ast.walk(func)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "command" for t in n.targets)
        ),
        None,
    )
    if command is None:
        command = next(n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value)
    return " ".join(_render(command, known).split())


_PLACEHOLDERS = (
    (re.compile(r"\{(?:wl_config\.model|model)\.xla_flags\}"), "{xla_flags}"),
    (re.compile(r"\{(?:wl_config\.)?num_steps\}"), "{steps}"),
    (re.compile(r"\{(?:wl_config\.model|model)\.model_type\}"), "{model_type}"),
    (re.compile(r"\{(?:wl_config\.)?base_output_directory\}"), "{base_output_directory}"),
    (re.compile(r"\{(?:wl_config\.)?(?:libtpu_date|libtpu_nightly_version)\}"), "{libtpu_version}"),
    (re.compile(r'run_name="?\{[^ ]*'), "run_name={run_name}"),
    (re.compile(r"\{run_name_command\}"), "run_name={run_name}"),
    (re.compile(r"\{config_tuning_params\}"), "{tuning_params}"),
    (re.compile(r"\{libtpu_flags\}"), "LIBTPU_INIT_ARGS={xla_flags}"),
)


def pod_command(runner: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The pod command of a plain xpk run, split into exports, entry and argument template."""
    tree = ast.parse(runner)
    func = _function(tree, "build_user_command")
    if func is None:
        raise SystemExit("maxtext_xpk_runner.py has no build_user_command")
    assigned = _constant_assignments(func)
    known = dict(_PLAIN_RUN)
    for name in ("jax_platforms", "vertex_tensorboard"):
        choices = [v for v in assigned.get(name, []) if v and v != "proxy"]
        known[name] = choices[-1] if choices else ""
    buffer = re.search(r"buffer_size=(\d+)", runner)
    if buffer:
        known["buffer_size"] = buffer.group(1)
    text = _command_text(func, known)
    text = re.sub(r"\{os\.path\.join\([^}]*base\.yml'\)\}", "MaxText/configs/base.yml", text)
    text = re.sub(r"LIBTPU_INIT_ARGS='\{", "LIBTPU_INIT_ARGS={", text)
    text = text.replace("xla_flags}'", "xla_flags}")
    for pattern, replacement in _PLACEHOLDERS:
        text = pattern.sub(replacement, text)
    env: list[list[str]] = []
    entry: list[str] = []
    args: list[str] = []
    for segment in (s.strip() for s in text.split("&&")):
        words = segment.replace('=""', "=").split()
        if not words or words[0] == "echo":
            continue
        if words[0] == "export":
            env += [list(w.partition("=")[::2]) for w in words[1:]]
        elif "python3" in words:
            at = words.index("python3")
            take = 4 if words[at + 1] == "-m" else 3
            entry, args = words[at : at + take], words[at + take :]
    if not entry:
        raise SystemExit("build_user_command: no python3 training command found")
    return {
        "env": env,
        "entry": entry,
        "args": args,
        "libtpu_install": libtpu_install(func, defaults),
    }


def libtpu_install(func: ast.FunctionDef, defaults: dict[str, Any]) -> str:
    """The install step the default libtpu type runs (empty for the image's own libtpu)."""
    if defaults.get("libtpu_type") != "nightly-libtpu":
        return ""
    for node in ast.walk(func):
        if isinstance(node, ast.AugAssign):
            text = " ".join(_render(node.value, {}).split()).removesuffix("&&").strip()
            if "pip install libtpu" in text and "{" in text:
                for pattern, replacement in _PLACEHOLDERS:
                    text = pattern.sub(replacement, text)
                return text
    return ""


def runner_facts(mirror: Path, rev: str) -> dict[str, Any]:
    runner_main = git_show(mirror, rev, "benchmarks/benchmark_runner.py") or ""
    runner_lib = git_show(mirror, rev, "benchmarks/maxtext_xpk_runner.py") or ""
    parsed = argparse_defaults(ast.parse(runner_main))
    lib = ast.parse(runner_lib)
    enum_values = {
        ast.unparse(t): _literal(n.value)
        for n in ast.walk(lib)
        if isinstance(n, ast.Assign)
        for t in n.targets
    }
    defaults: dict[str, Any] = {k: parsed.get(k) for k in _OPTIONS if k in parsed}
    if "num_steps" not in defaults:
        steps = re.search(r"^\s*num_steps = (\d+)", runner_lib, re.MULTILINE)
        defaults["num_steps"] = int(steps.group(1)) if steps else None
    if "priority" not in defaults:
        priority = re.search(r"--priority=(\w+)", runner_lib)
        defaults["priority"] = priority.group(1) if priority else None
    defaults.setdefault("max_restarts", None)
    if "libtpu_type" not in defaults:
        hard = re.search(r"libtpu_type=LibTpuType\.(\w+)", runner_lib)
        defaults["libtpu_type"] = enum_values.get(hard.group(1)) if hard else None
    if defaults.get("num_slices") is not None:
        defaults["num_slices"] = int(defaults["num_slices"])
    if "BASE_DOCKER_IMAGE = " in runner_lib:  # the oldest runner ignores --base_docker_image
        image = re.search(r"BASE_DOCKER_IMAGE = '([^']+)'", runner_lib)
        defaults["base_docker_image"] = image.group(1) if image else defaults["base_docker_image"]
    return {
        "subcommand": "xpk" if "add_subparsers" in runner_main else "",
        "options": sorted(parsed),
        "defaults": defaults,
        "pod_command": pod_command(runner_lib, defaults),
    }


def build(mirror: Path, revisions: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rev in revisions:
        out[rev] = {
            "commit": commit_of(mirror, rev),
            "date": date_of(mirror, rev),
            "runner": runner_facts(mirror, rev),
            "models": read_models(mirror, rev),
        }
    return {"revisions": out}


HEADER = """\
# Generated by tools/build_benchmark_models.py from MaxText's benchmarks/ at each revision
# tpu-recipes' Trillium and v5p recipes pin. Do not edit by hand: run the tool again.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maxtext", type=Path, required=True, help="MaxText git directory")
    parser.add_argument("--rev", action="append", help="a revision (default: the pinned ones)")
    parser.add_argument("--out", type=Path, default=OUT)
    opts = parser.parse_args(argv)
    data = build(opts.maxtext, tuple(opts.rev or REVISIONS))
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)
    opts.out.write_text(HEADER + body, encoding="utf-8")
    count = sum(len(r["models"]) for r in data["revisions"].values())
    print(f"{opts.out}: {len(data['revisions'])} revisions, {count} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
