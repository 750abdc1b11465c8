"""Probe: MaxText's own configuration step (``pyconfig.initialize``) for one or more commands.

Runs in the MaxText runtime (Python 3.12). MaxText is imported once and every configuration
is initialised in turn, on CPU: JAX is held to its CPU backend, the device count comes from
``compile_topology`` (or ``internal_compile_num_devices`` for a slice MaxText's table lacks),
the distributed system is never started, and an audit hook refuses every write outside a
temporary folder (MaxText writes ``/dev/termination-log`` when a configuration fails).

payload (argv[1], JSON)::

    {"configs": [{"id": "a", "base_config": "maxtext/configs/base.yml",
                  "args": ["model_name=llama3-8b", "steps=10"],
                  "compile_topology": "tpu7x-256", "devices": 256, "num_slices": 1}]}

answer (last stdout line, JSON)::

    {"maxtext_version": "0.2.5", "import_seconds": 9.1, "blocked_writes": [],
     "results": [{"id": "a", "ok": true, "error_type": "", "message": "", "key": "",
                  "seconds": 0.2, "base_config": "/.../base.yml", "added": [...],
                  "derived": {"num_target_devices": 256, ...}}]}

Nothing here comes from a shell: arguments arrive as a JSON list and go to MaxText as a list.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DERIVED_REPORTED = (
    "num_target_devices",
    "num_slices",
    "emb_dim",
    "num_decoder_layers",
    "global_batch_size_to_train_on",
    "ici_parallelism",
    "dcn_parallelism",
)
"""Values MaxText computes that the answer carries back (small, JSON-friendly)."""

MAXTEXT_ERROR_HANDLER = "_handle_config_exception"
"""pyconfig's handler: logs the banner, writes /dev/termination-log, exits 2 (0.2.5)."""
MESSAGE_LIMIT = 900
_NOT_IN = re.compile(r"^'(?P<key>[^']+)' not in '.*'\.?$", re.DOTALL)
_KEYS_OVERRIDDEN = re.compile(r"Keys \[(?P<keys>[^\]]*)\] are overridden")
_LONG_CHOICES = re.compile(r"Input should be (?P<list>(?:'[^']*', ){8,}'[^']*',? or '[^']*')")
_WHOLE_INPUT = re.compile(r", input_value=\{.*?, input_type=dict\]")
"""A model-level error repeats the whole configuration as its input: drop it."""
_PYDANTIC_URL = re.compile(r"^\s*For further information visit .*$", re.MULTILINE)


class _WriteGuard:
    """An audit hook that lets files be written only under the allowed folders."""

    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    _EVENTS = ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.symlink")

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = [os.path.realpath(a) for a in allowed]
        self.blocked: list[str] = []

    def _inside(self, path: object) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor (stdout, stderr, pipes)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return True
        real = os.path.realpath(path)
        if real == os.devnull:
            return True
        return any(real == a or real.startswith(a + os.sep) for a in self.allowed)

    def _is_write(self, mode: object, flags: object) -> bool:
        if isinstance(mode, str):
            return any(c in mode for c in "wax+")
        return isinstance(flags, int) and bool(flags & self._WRITE_FLAGS)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            if self._is_write(mode, flags) and not self._inside(path):
                self._refuse(str(path))
        elif event in self._EVENTS and args and not self._inside(args[0]):
            self._refuse(f"{event} {args[0]}")

    def _refuse(self, what: str) -> None:
        if len(self.blocked) < 50:
            self.blocked.append(what)
        raise PermissionError(f"pyconfig probe: writing outside its temporary folder: {what}")


def _raise_unchanged(error: Exception) -> None:
    """Stands in for MaxText's handler (which writes /dev/termination-log and exits)."""
    raise error


def _base_config(configs_dir: str, requested: str) -> str:
    """The installed counterpart of the command's config file (``.../configs/<rest>``)."""
    _, sep, rest = requested.replace("\\", "/").rpartition("configs/")
    candidate = Path(configs_dir) / (rest if sep else Path(requested).name)
    if rest and candidate.is_file():
        return str(candidate)
    return str(Path(configs_dir) / "base.yml")


def _extras(spec: dict[str, Any], given: set[str], topologies: Any) -> list[str]:
    """Arguments that keep MaxText on CPU and away from devices, files and the network."""
    slices = int(spec.get("num_slices") or 1)
    out: list[str] = []
    if "compile_topology" not in given:
        topology = str(spec.get("compile_topology") or "")
        if topology and topology in topologies:
            out.append(f"compile_topology={topology}")
        elif spec.get("devices"):
            total = int(spec["devices"]) * slices
            out += ["internal_compile=true", f"internal_compile_num_devices={total}"]
        out.append(f"compile_topology_num_slices={slices}")
    out += ["skip_jax_distributed_system=true", "jax_cache_dir=", "log_config=false"]
    return out


def _trim(message: str) -> str:
    matched = _NOT_IN.match(message.strip())
    if matched:
        return f"'{matched['key']}' not in MaxText's list of accepted names"
    message = _WHOLE_INPUT.sub("]", _PYDANTIC_URL.sub("", message))
    message = _LONG_CHOICES.sub(
        lambda m: f"Input should be one of {m['list'].count(chr(39)) // 2} names", message
    )
    message = "\n".join(line.rstrip() for line in message.splitlines() if line.strip())
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def _offending_key(error: BaseException, message: str) -> str:
    matched = _NOT_IN.match(message.strip())
    if matched:
        return matched["key"]
    keys = _KEYS_OVERRIDDEN.search(message)
    if keys:
        return keys["keys"].split(",")[0].strip().strip("'\"")
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            loc = first.get("loc") or ()
            return ".".join(str(part) for part in loc)
        except (IndexError, TypeError, AttributeError):
            return ""
    return ""


def _derived(config: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in DERIVED_REPORTED:
        try:
            value = getattr(config, name)
        except (AttributeError, ValueError):
            continue
        if isinstance(value, tuple):
            value = list(value)
        if value is None or isinstance(value, (bool, int, float, str, list)):
            out[name] = value
    return out


def _check_one(
    pyconfig: Any, configs_dir: str, topologies: Any, spec: dict[str, Any]
) -> dict[str, Any]:
    args = [str(a) for a in spec.get("args", [])]
    given = {a.partition("=")[0] for a in args}
    base = _base_config(configs_dir, str(spec.get("base_config") or "base.yml"))
    extras = _extras(spec, given, topologies)
    answer: dict[str, Any] = {
        "id": spec.get("id", ""),
        "ok": False,
        "error_type": "",
        "message": "",
        "key": "",
        "base_config": base,
        "added": extras,
        "derived": {},
    }
    saved_env = dict(os.environ)
    started = time.perf_counter()
    try:
        config = pyconfig.initialize(["", base, *args, *extras])
        answer["ok"] = True
        answer["derived"] = _derived(config)
    except (Exception, SystemExit) as error:  # every failure is the answer
        text = str(error)
        answer["error_type"] = type(error).__name__
        answer["message"] = _trim(text)
        answer["key"] = _offending_key(error, text)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    answer["seconds"] = round(time.perf_counter() - started, 3)
    return answer


def main(argv: list[str]) -> int:
    payload = json.loads(argv[1]) if len(argv) > 1 else {}
    workdir = tempfile.mkdtemp(prefix="tpu-trainer-pyconfig-")
    guard = _WriteGuard([workdir])
    sys.addaudithook(guard)
    sys.dont_write_bytecode = True
    os.chdir(workdir)
    for name in [k for k in os.environ if k.startswith("M_")]:
        del os.environ[name]  # MaxText reads M_<KEY> as an override of <key>
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["HF_HOME"] = str(Path(workdir) / "hf")
    answer: dict[str, Any] = {"results": []}
    started = time.perf_counter()
    try:
        pyconfig = importlib.import_module("maxtext.configs.pyconfig")
        specs = importlib.import_module("maxtext.utils.accelerator_to_spec_map")
        configs_dir = str(importlib.import_module("maxtext.utils.globals").MAXTEXT_CONFIGS_DIR)
        answer["maxtext_version"] = importlib.metadata.version("maxtext")
        answer["import_seconds"] = round(time.perf_counter() - started, 3)
        if hasattr(pyconfig, MAXTEXT_ERROR_HANDLER):
            setattr(pyconfig, MAXTEXT_ERROR_HANDLER, _raise_unchanged)
        topologies = getattr(specs, "UserFacingNameToSystemCharacteristics", {})
        for spec in payload.get("configs", []):
            answer["results"].append(_check_one(pyconfig, configs_dir, topologies, spec))
    except Exception as error:  # the probe's own failure
        answer["error"] = f"{type(error).__name__}: {_trim(str(error))}"
    finally:
        os.chdir(tempfile.gettempdir())
        shutil.rmtree(workdir, ignore_errors=True)
    answer["blocked_writes"] = guard.blocked
    answer["seconds"] = round(time.perf_counter() - started, 3)
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
