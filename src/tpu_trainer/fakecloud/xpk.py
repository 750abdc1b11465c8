"""The fake ``xpk``: every command line first goes through xpk's own argument parser (as
``tpu_trainer.infra.xpk_parser`` runs it); then ``cluster adapt`` (see xpk_adapt) and
``workload create``, ``delete`` and ``list`` act on the fake cloud."""

from __future__ import annotations

import sys
from typing import Any

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud import workloads as wls
from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit, run_tool
from tpu_trainer.fakecloud.state import State
from tpu_trainer.fakecloud.xpk_adapt import cluster_adapt
from tpu_trainer.fakecloud.xpk_steps import credentials, ensure_policy, system
from tpu_trainer.fakecloud.xpk_text import XPK_VERSION, Xpk, zone_to_region
from tpu_trainer.infra.xpk_parser import check_xpk_argvs
from tpu_trainer.plan.slices import Slice

_USAGE = (
    "usage: xpk [-h]\n           {workload,storage,cluster,inspector,info,batch,job,kind,"
    "shell,version,config,run} ...\n"
)


def _schedulable_by_configmap(x: Xpk, state: State, s: Slice) -> None:
    """xpk's check_if_workload_can_schedule against ``<cluster>-resources-configmap``."""
    cm = k8s.get(state, k8s.KINDS[4], f"{x.arg('cluster')}-resources-configmap")
    if cm is None:
        x.say(
            "Skipping workload scheduling validation, because there's no Resources ConfigMap "
            "in the cluster."
        )
        return
    data = cm.get("data") or {}
    device, wanted = s.device_type_number, int(x.arg("num_slices") or 1) * s.hosts
    if device not in data:
        x.say(
            f"Workload scheduling validation failed. XPK will not create the workload "
            f"{x.arg('workload')}. The nodepool for the requested device type {device} is not "
            f"present on the cluster {x.arg('cluster')}."
        )
        x.fail(1)
    if wanted > int(data[device]):
        x.say(
            f"{x.arg('workload')} is requesting {x.arg('num_slices')} slice/slices of {device}, "
            f"which is {wanted} VMs, but the cluster only contains {data[device]} VMs of "
            f"{device}. XPK will not create this workload."
        )
        x.fail(1)


def _check_zone(x: Xpk, state: State, wl: dict[str, Any]) -> None:
    """The fake's rule (seed 000): submit to the zone the slice's node pools are in."""
    pools = wls.matching_pools(state, wl, running=False)
    zones = sorted({p["zone"] for p in pools})
    if pools and wl["zone"] not in zones:
        x.say(
            f"Cluster {x.arg('cluster')} has node pools of {wl['device']} only in zone: "
            f"{', '.join(zones)}, not in --zone={wl['zone']}. Use the zone of the node pools "
            "to create workloads on them."
        )
        x.fail(1)


def workload_create(x: Xpk, state: State) -> None:
    x.say(f"Starting xpk v{XPK_VERSION}")
    credentials(x, state)
    name = x.arg("workload")
    if name in state["workloads"]:
        caller = (
            'commands/workload.py", line 403, in workload_create\n'
            "    will_delete = ask_for_user_consent("
        )
        if not x.consent(f"{name} already exists, do you want to overwrite it?", caller):
            x.say(
                f"{name} already exists, XPK will not create this workload. Please pick a new "
                "workload name"
            )
            x.fail(1)
        x.say(f"Deleting {name} to overwrite it...")
        del state["workloads"][name]
    s = system(x)
    _schedulable_by_configmap(x, state, s)
    x.say("Starting workload create")
    zone = x.arg("zone") or ""
    image = x.arg("docker_image") or x.arg("base_docker_image") or ""
    wl = wls.new_workload(
        state,
        name,
        s,
        num_slices=int(x.arg("num_slices") or 1),
        zone=zone,
        image=image,
        command=x.arg("command") or "",
        parallel_flag=bool(x.arg("use_parallel_containers")),
    )
    _check_zone(x, state, wl)
    ensure_policy(x, state, s, zone_to_region(zone))
    x.task("Creating Workload", "kubectl apply -f /tmp/tmpxpkworkload")
    state["workloads"][name] = wl
    if state["behaviours"].get("workload_create_fails_after_submit"):
        x.say("Unable to connect to the server: net/http: TLS handshake timeout")
        x.fail(1)
    project, region = x.arg("project"), zone_to_region(zone)
    x.say(
        f"Follow your workload here: https://console.cloud.google.com/kubernetes/service/"
        f"{region}/{x.arg('cluster')}/default/{name}/details?project={project}"
    )
    x.done()


def workload_delete(x: Xpk, state: State) -> None:
    x.say(f"Starting xpk v{XPK_VERSION}")
    x.say("Starting Workload delete")
    credentials(x, state)
    name = x.arg("workload")
    x.task("Delete Workload", f"kubectl delete jobset {name} -n default")
    if name not in state["workloads"]:
        x.say(f'Error from server (NotFound): jobsets.jobset.x-k8s.io "{name}" not found')
        x.say("Delete Workload request returned ERROR 1")
        x.fail(1)
    del state["workloads"][name]
    x.done()


def _wait(x: Xpk, state: State, name: str) -> int:
    """xpk's wait_for_job_completion: 0, 124 (timeout), 125 (failed) or 1."""
    wl = state["workloads"].get(name)
    if wl is None:
        x.say(f"Workload named {name} does not exist.")
        return 1
    timeout = x.arg("timeout")
    shown = f"{timeout}s" if timeout is not None else "max timeout (1 week)"
    x.task(
        f"Wait for workload to finish with timeout of {shown}",
        f"kubectl wait --for=condition=Finished workload jobset-{name}-xxxxx --timeout={timeout or -1}s",
    )
    admitted = wls.kueue_blocker(state, wl) is None and wls.schedulable(state, wl)
    if admitted and not wls.hangs(wl):
        wl["reads"] = max(wl["reads"], wls.FINISHED_READS)
    finished = admitted and wls.phase(wl) in ("Succeeded", "Failed")
    link = (
        f"https://console.cloud.google.com/kubernetes/service/{zone_to_region(x.arg('zone'))}/"
        f"{x.arg('cluster')}/default/{name}/details?project={x.arg('project')}"
    )
    if not finished:
        x.say(f"Timed out waiting for your workload after {shown}, see your workload here: {link}")
        return 124
    x.say(f"Finished waiting for your workload, see your workload here: {link}")
    status = "Completed" if wl["exit_code"] == 0 else "Failed"
    x.say(f"Your workload finished with status: {status}")
    if status != "Completed":
        x.say("Your workload did not complete successfully")
        return 125
    return 0


def workload_list(x: Xpk, state: State) -> None:
    x.say(f"Starting xpk v{XPK_VERSION}")
    x.say("Starting workload list")
    credentials(x, state)
    waited = x.arg("wait_for_job_completion")
    if waited:
        code = _wait(x, state, waited)
        if code != 0:
            x.say(f"Wait for job completion returned ERROR {code}")
            x.fail(code)
    rows = ["Jobset Name   Created Time           Priority   TPU VMs Needed   Last Status"]
    for wl in state["workloads"].values():
        if waited and wl["name"] != waited:
            continue
        ph = wls.observe(state, wl)
        rows.append(
            f"{wl['name']}   2026-11-22T06:00:00Z   medium   "
            f"{wl['hosts'] * wl['num_slices']}   {ph}"
        )
    x.say("Workload List Output:\n" + "\n".join(rows))
    x.done()


def _commands() -> dict[tuple[str, str], Any]:
    return {
        ("cluster", "adapt"): cluster_adapt,
        ("workload", "create"): workload_create,
        ("workload", "delete"): workload_delete,
        ("workload", "list"): workload_list,
    }


def _handler(checked: dict[str, Any] | str) -> Handler:
    if isinstance(checked, str):
        raise ToolExit(checked, 2 if checked.startswith("usage:") else 1)
    args: dict[str, Any] = checked
    group = str(args.get("xpk_subcommands"))
    verb = str(args.get(f"xpk_{group}_subcommands"))
    command = _commands().get((group, verb))
    if command is None:
        raise ToolExit(f"fake xpk: `xpk {group} {verb}` is not answered by the fake cloud\n", 1)

    def run(state: State, answer: Answer) -> None:
        x = Xpk(answer, args)
        if args.get("dry_run"):
            x.say(f"Starting xpk v{XPK_VERSION}")
            x.say("Dry run: the fake cloud changes nothing.")
            x.done()
            return
        command(x, state)

    return run


def _install_parser() -> None:
    """xpk's parser lives in the tool's xpk venv: install it on first use (progress on stderr)."""
    import os

    from tpu_trainer.infra.runner import SubprocessRunner
    from tpu_trainer.runtime.xpk_runtime import install_xpk

    if os.environ.get("TPU_TRAINER_XPK_PYTHON"):
        return

    def progress(line: str) -> None:
        sys.stderr.write(line + "\n")

    install_xpk(SubprocessRunner(), progress)


def check(argv: list[str]) -> dict[str, Any] | str:
    """xpk's parser's verdict: the parsed arguments, or the text xpk prints on stderr."""
    try:
        _install_parser()
        verdict = check_xpk_argvs([argv])[0]
    except TpuTrainerError as e:
        return f"fake xpk: cannot check the command line with xpk's parser: {e.message} ({e.fix})\n"
    if not verdict.get("ok"):
        return f"{_USAGE}xpk: error: {verdict.get('error')}\n"
    args = verdict.get("args")
    return args if isinstance(args, dict) else {}


def main(argv: list[str]) -> int:
    """Answer one xpk command line (without the leading ``xpk``)."""
    argv = list(argv[1:] if argv and argv[0] == "xpk" else argv)
    checked = check(argv)  # outside the state lock: it takes about a second
    return run_tool("xpk", argv, lambda _a: _handler(checked))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
