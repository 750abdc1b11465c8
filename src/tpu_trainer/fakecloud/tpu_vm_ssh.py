"""The fake ``gcloud compute tpus tpu-vm ssh``: a command on one, some or all workers.

The command text is never run, nor given to a shell: :mod:`tpu_trainer.fakecloud.tpu_vm_commands`
reads its shape from its words (install, device check, train, follow again, stop by pid, what is
left). Install and device check answer at once with the scenario's scripted output per worker;
train starts the program on the workers (:mod:`tpu_trainer.fakecloud.tpu_vm_program`), detached
from the session, and the session then follows its log until it ends, as the attach command
does. Like gcloud, ``--output-directory=DIR`` writes worker N's output to ``DIR/N.log`` (without
it, all output goes to stdout), status lines go to stderr, a failing worker adds ``##### Command
execution on worker N failed with exit status S. Continuing.``, and the exit status is the first
non-zero one in worker order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud import maxtext_log as mlog
from tpu_trainer.fakecloud import tpu_vm_program as program
from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit
from tpu_trainer.fakecloud.gcloud_cli import Ctx
from tpu_trainer.fakecloud.state import State, clock
from tpu_trainer.fakecloud.tpu_vm_commands import Command, Shape, parse
from tpu_trainer.fakecloud.tpu_vm_nodes import BASE_IMAGE, find_node, vm_slice
from tpu_trainer.fakecloud.tpu_vm_program import WorkerResult

_SHORT = "(this worker's output goes to its own log; worker 0 logs the metrics)\n"
_TOPOLOGY_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 1, in <module>\n'
    "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU "
    "topology. (set JAX_PLATFORMS='' to automatically choose an available backend)\n"
)


_VENV = re.compile(r"(?:^|/)venv-([a-z0-9][a-z0-9.-]*)/bin/python")
_ACCEPT = re.compile(r"AcceptEnv ((?:[A-Z_][A-Z0-9_]* ?)+)")
_SEND_ENV = re.compile(r"^-o SendEnv=([A-Z_][A-Z0-9_]*)$")
_FILE_ARG = re.compile(r"[\w.-]+\.(?:py|ya?ml)")


def _workers(flag: str, count: int) -> list[int]:
    if flag.lower() == "all":
        return list(range(count))
    picked: set[int] = set()
    for part in (p for p in flag.split(",") if p):
        start, _, end = part.partition("-")
        picked.update(range(int(start), int(end or start) + 1))
    return sorted(picked)


def vm_ssh(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("user_tpu")
    p.add_argument("--zone")
    p.add_argument("--worker", default="0")
    p.add_argument("--command")
    p.add_argument("--output-directory")
    p.add_argument("--ssh-flag", action="append", default=[])
    p.add_argument("--internal-ip", action="store_true")
    p.add_argument("--strict-host-key-checking")
    p.add_argument("--ssh-key-expire-after")
    ns = p.parse_args(args)
    if not ns.zone:
        raise ctx.fail("Error parsing [tpu].\nFailed to find attribute [zone].")
    out_dir: Path | None = None
    if ns.output_directory:
        if not ns.command:
            raise ctx.fail(
                "Invalid value for [--output_directory]: cannot be specified without the "
                "`--command` flag. Please specify the `--command` flag or remove the "
                "--output-directory flag."
            )
        out_dir = Path(os.path.expandvars(ns.output_directory)).expanduser().absolute()
        if not out_dir.is_dir():
            raise ctx.fail(
                f"Invalid value for [--output_directory]: Failed to find directory {out_dir}. "
                "Please create it or specify another directory"
            )
    send = {m[1] for flag in ns.ssh_flag if (m := _SEND_ENV.match(flag.strip()))}

    def run(state: State, answer: Answer) -> None:
        node = find_node(ctx, state, ns.user_tpu.rpartition("@")[2], ns.zone)
        program.settle(node, clock(state))
        if node["state"] in ("STOPPED", "STOPPING", "DELETING", "PREEMPTED", "TERMINATED"):
            raise ctx.fail(f"This TPU VM is {node['state']} and cannot be reached.")
        found = vm_slice(node["accelerator_type"])
        workers = _workers(ns.worker, found.hosts if found else 1)
        if len(workers) > 1 and not ns.command:
            raise ctx.fail(
                "Invalid value for [--worker]: cannot target multiple workers without the "
                "`--command` flag."
            )
        if out_dir is not None:
            answer.err(f"Preparing SSH command execution; output will be logged to {out_dir}")
        if node["state"] != "READY":
            for w in workers:
                answer.err(f"SSH: Attempting to connect to worker {w}...")
            answer.err(f"ssh: connect to host {node['name']} port 22: Connection refused")
            raise ToolExit("", 255)
        command = parse(ns.command or "")
        if command.shape in (Shape.TRAIN, Shape.ATTACH):
            for w in workers:
                answer.err(f"SSH: Attempting to connect to worker {w}...")
            if command.shape is Shape.TRAIN:
                _start(state, node, command, workers, send)
            answer.after = program.follow(node["name"], command.folder, workers, out_dir)
            return
        results = _answer(state, node, ns.command or "", command, workers)
        _write(answer, results, out_dir)
        program.finish(answer, {w: r.code for w, r in results.items()})

    return run


def _answer(
    state: State, node: dict[str, Any], text: str, command: Command, workers: list[int]
) -> dict[int, WorkerResult]:
    behaviour = state["tpu_vm"]["behaviour"]
    if command.shape is Shape.INSTALL:
        venv = _VENV.search(text)
        if venv and venv[1] not in node["venvs"]:
            node["venvs"].append(venv[1])
        accept = _ACCEPT.search(text)
        if accept:
            node["accept_env"] = sorted(set(node["accept_env"]) | set(accept[1].split()))
        return _scripted(behaviour["install"], workers)
    if command.shape is Shape.DEVICES:
        return {w: _devices(node, behaviour, text, w) for w in workers}
    if command.shape is Shape.STOP:  # TERM to the program's group, then wait for its end
        program.stop(node, command.folder, program.hang_of(state), clock(state))
        return {w: WorkerResult("", 0) for w in workers}
    if command.shape is Shape.LEFT:
        said = program.left(node, command.folder, program.hang_of(state), clock(state))
        return {w: WorkerResult(said, 0) for w in workers}
    unknown = "fake tpu-vm ssh: this command shape is not known to the fake (see docs/simulated-cloud.md)\n"
    return {w: WorkerResult(unknown, 127) for w in workers}


def _scripted(
    script: dict[str, Any], workers: list[int], first: str | None = None
) -> dict[int, WorkerResult]:
    out: dict[int, WorkerResult] = {}
    for w in workers:
        text = (
            (first if first is not None else script["log"])
            if w == 0
            else (
                script["other_workers_log"] if script["other_workers_log"] is not None else _SHORT
            )
        )
        code = script["exit_code"]
        if w == script["failing_worker"]:
            text = script["failing_log"] if script["failing_log"] is not None else text
            code = script["failing_exit_code"]
        out[w] = WorkerResult(text, code)
    return out


def _devices(
    node: dict[str, Any], behaviour: dict[str, Any], command: str, worker: int
) -> WorkerResult:
    venv = _VENV.search(command)
    if venv is None or venv[1] not in node["venvs"]:
        path = command.split(" ", 1)[0]
        return WorkerResult(f"bash: line 1: {path}: No such file or directory\n", 127)
    found = vm_slice(node["accelerator_type"])
    if found is None:
        return WorkerResult("RuntimeError: no TPU\n", 1)
    if node["runtime_version"] == BASE_IMAGE and found.accelerator.xpk_prefix == "v6e":
        return WorkerResult(_TOPOLOGY_ERROR, 1)
    local = behaviour["devices"].get(str(worker), found.jax_devices // found.hosts)
    total = local + (found.jax_devices // found.hosts) * (found.hosts - 1)
    return WorkerResult(f"TPU_TRAINER_DEVICES {worker} {total} {local}\n", 0)


def _start(
    state: State, node: dict[str, Any], command: Command, workers: list[int], send: set[str]
) -> None:
    """The program starts on the workers, detached: what each prints is decided now."""
    script = state["tpu_vm"]["behaviour"]["train"]
    results = _train(node, script, command, workers, send, state["tpu_vm"])
    preempts = bool(node.pop("preempting", False))
    pace = float(script.get("line_seconds") or 0.0)
    program.start(node, command, results, line_seconds=pace, preempts=preempts, now=clock(state))


def _train(
    node: dict[str, Any],
    script: dict[str, Any],
    command: Command,
    workers: list[int],
    send: set[str],
    tv: dict[str, Any],
) -> dict[int, WorkerResult]:
    words, folder, text = command.program, command.folder, command.program_text
    venv = _VENV.search(text)
    if venv is None or venv[1] not in node["venvs"]:
        missing = next((w for w in words if w.endswith("/bin/python")), "python")
        said = f"env: '{missing}': No such file or directory\n"
        return {w: WorkerResult(said, 127) for w in workers}
    for word in words:
        if _FILE_ARG.fullmatch(word) and f"{folder}/{word}" not in node["files"]:
            said = (
                f"python: can't open file '/home/user/{folder}/{word}': "
                "[Errno 2] No such file or directory\n"
            )
            return {w: WorkerResult(said, 2) for w in workers}
    seen = sorted(n for n in send if n in node["accept_env"] and os.environ.get(n))
    node["env_seen"] = seen
    echo = "".join(f"{n}={os.environ[n]}\n" for n in script["echo_env"] if n in seen)
    return _scripted(script, workers, first=echo + _train_log(node, script, text, tv))


def _train_log(
    node: dict[str, Any], script: dict[str, Any], command: str, tv: dict[str, Any]
) -> str:
    """Worker 0's log: as scripted, or, with ``preempt_after_step``, the first run of a
    ``run_name`` cut by the preemption (the node is marked to go PREEMPTED once the program's
    last line is out) and every later one restoring its last durable checkpoint."""
    after = script.get("preempt_after_step")
    if after is None:
        return str(script["log"])
    runs = tv.setdefault("preempted_runs", {})
    name = mlog.command_arg(command, "run_name") or "run"
    if name not in runs:
        runs[name] = mlog.durable_before(int(after), command)
        node["preempting"] = True
        return mlog.reclaimed_log(str(script["log"]), command, int(after))
    return mlog.resumed_log(str(script["log"]), command, runs[name])


def _write(answer: Answer, results: dict[int, WorkerResult], out_dir: Path | None) -> None:
    for w, res in results.items():
        answer.err(f"SSH: Attempting to connect to worker {w}...")
        if out_dir is not None:
            (out_dir / f"{w}.log").write_text(res.output, encoding="utf-8")
        elif res.output:
            answer.out(res.output)
