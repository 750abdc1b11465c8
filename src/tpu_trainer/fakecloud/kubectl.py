"""The fake ``kubectl``: get, logs, apply, patch, create configmap, delete, config, version."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import yaml

from tpu_trainer.fakecloud import k8s, ray_k8s
from tpu_trainer.fakecloud import workloads as wls
from tpu_trainer.fakecloud.common import Answer, Handler, StrictParser, ToolExit, run_tool
from tpu_trainer.fakecloud.kubectl_io import (
    not_found,
    print_objects,
    read_manifests,
    selected,
    selector_terms,
)
from tpu_trainer.fakecloud.kueue_workloads import kueue_workload_json
from tpu_trainer.fakecloud.state import State, state_path

_VERBS = ("get", "logs", "apply", "patch", "create", "delete", "config", "version")


def _parser(verb: str) -> StrictParser:
    def on_error(message: str) -> NoReturn:
        prefix = "error"
        if message.startswith("unrecognized arguments: "):
            prefix = "Error"  # cobra's own complaints are capitalised
            flag = message.split(": ", 1)[1].split(maxsplit=1)[0].split("=", 1)[0]
            message = (
                f"unknown shorthand flag: '{flag[1:2]}' in {flag}"
                if not flag.startswith("--")
                else f"unknown flag: {flag}"
            )
        raise ToolExit(f"{prefix}: {message}\nSee 'kubectl {verb} --help' for usage.\n", 1)

    p = StrictParser(on_error, prog="kubectl")
    p.add_argument("--context")
    p.add_argument("--kubeconfig")
    p.add_argument("--request-timeout")
    p.add_argument("-n", "--namespace", default="default")
    return p


def _kind(word: str) -> k8s.Kind:
    kind = k8s.find_kind(word)
    if kind is None:
        raise ToolExit(f'error: the server doesn\'t have a resource type "{word}"\n', 1)
    return kind


def _kind_and_names(words: list[str]) -> tuple[k8s.Kind, list[str]]:
    if not words:
        raise ToolExit("error: you must specify the type of resource to get.\n", 1)
    head, slash, name = words[0].partition("/")
    if slash:
        return _kind(head), [name, *words[1:]]
    return _kind(head), words[1:]


def _objects(
    state: State, kind: k8s.Kind, namespace: str | None, selector: str | None
) -> list[Any]:
    if kind.virtual and namespace not in (None, "default"):
        return []  # workloads run in the default namespace
    if kind.kind == "Pod":
        terms = selector_terms(selector)
        jobset = next(
            (v for key, op, v in terms if key == "jobset.sigs.k8s.io/jobset-name" and op == "="),
            None,
        )
        return selected(wls.pods(state, jobset), terms)
    if kind.kind == "JobSet":
        found = [wls.jobset_json(state, wl) for wl in state["workloads"].values()]
        return selected(found, selector_terms(selector))
    if kind.kind == "Workload" and namespace in (None, "default"):  # Kueue's, per JobSet
        found = [kueue_workload_json(state, wl) for wl in state["workloads"].values()]
        stored = k8s.listed(state, kind, namespace)
        return selected(stored + found, selector_terms(selector))
    return selected(k8s.listed(state, kind, namespace), selector_terms(selector))


def get(args: list[str]) -> Handler:
    p = _parser("get")
    p.add_argument("words", nargs="*")
    p.add_argument("-o", "--output")
    p.add_argument("-l", "--selector")
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("--ignore-not-found", action="store_true")
    p.add_argument("--show-labels", action="store_true")
    p.add_argument("--no-headers", action="store_true")
    ns = p.parse_args(args)
    kind, names = _kind_and_names(ns.words)
    namespace = None if ns.all_namespaces else ns.namespace

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list" if not names else "describe"
        found = _objects(state, kind, namespace, ns.selector)
        if names:
            by_name = {o["metadata"]["name"]: o for o in found}
            missing = [n for n in names if n not in by_name]
            if missing and not ns.ignore_not_found:
                for n in missing[1:]:
                    answer.err(not_found(kind, n).rstrip("\n"))
                raise ToolExit(not_found(kind, missing[0]), 1)
            found = [by_name[n] for n in names if n in by_name]
        if (ns.output or "").startswith("jsonpath="):
            ray_k8s.jsonpath(answer, found, ns.output.removeprefix("jsonpath="))
            return
        print_objects(answer, kind, found, ns.output, single=len(names) == 1, namespace=namespace)

    return run


def _find_pod(state: State, name: str) -> tuple[dict[str, Any], int, int] | None:
    for wl in state["workloads"].values():
        for j, i, pod in wls.pod_names(wl):
            if pod == name:
                return wl, j, i
    return None


def logs(args: list[str]) -> Handler:
    p = _parser("logs")
    p.add_argument("pod")
    p.add_argument("-c", "--container")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("--tail", type=int)
    p.add_argument("--timestamps", action="store_true")
    p.add_argument("--all-containers", action="store_true")
    ns = p.parse_args(args)
    name = ns.pod.split("/", 1)[1] if ns.pod.startswith(("pod/", "pods/")) else ns.pod

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        found = _find_pod(state, name)
        if found is None or wls.kueue_blocker(state, found[0]) is not None:
            raise ToolExit(not_found(k8s.KINDS[6], name), 1)
        wl, j, i = found
        container = ns.container or wl["containers"][0]
        if container not in wl["containers"]:
            raise ToolExit(f"error: container {container} is not valid for pod {name}\n", 1)
        if not wls.schedulable(state, wl) or wls.phase(wl) == "Pending":
            raise ToolExit(
                f'Error from server (BadRequest): container "{container}" in pod '
                f'"{name}" is waiting to start: ContainerCreating\n',
                1,
            )
        text = wls.log_of(wl, j, i, container)
        if ns.tail is not None and ns.tail >= 0:
            text = "".join(text.splitlines(keepends=True)[-ns.tail :] if ns.tail else [])
        answer.stdout.append(text)
        if ns.follow and wl.get("hang_after_step") is not None and (j, i) == (0, 0):
            answer.after = wls.silent_follow(state_path(), wl["name"])

    return run


def _applicable(source: str, obj: dict[str, Any]) -> k8s.Kind:
    """The kind of a manifest's object, or kubectl's complaint about it."""
    kind = k8s.kind_of(obj)
    name = (obj.get("metadata") or {}).get("name", "")
    if kind is None or kind.virtual:
        raise ToolExit(
            f'error: resource mapping not found for name: "{name}" namespace: "" from '
            f'"{source}": no matches for kind "{obj.get("kind")}" in version '
            f'"{obj.get("apiVersion", "")}"\nensure CRDs are installed first\n',
            1,
        )
    if not name:
        raise ToolExit(
            f'error: error when creating "{source}": resource name may not be empty\n', 1
        )
    return kind


def apply(args: list[str]) -> Handler:
    p = _parser("apply")
    p.add_argument("-f", "--filename", action="append", required=True)
    p.add_argument("-o", "--output")
    p.add_argument("--server-side", action="store_true")
    p.add_argument("--force-conflicts", action="store_true")
    p.add_argument("--field-manager")
    p.add_argument("--dry-run", choices=["none", "client", "server"], default="none")
    p.add_argument("--validate", choices=["strict", "true", "warn", "ignore", "false"])
    ns = p.parse_args(args)
    docs = [(f, d) for f in ns.filename for d in read_manifests(f)]

    def run(state: State, answer: Answer) -> None:
        if ns.dry_run == "server":
            _admit_only(docs, answer)
            return
        done: list[tuple[k8s.Kind, dict[str, Any]]] = []
        for source, obj in docs:
            kind = _applicable(source, obj)
            ray_k8s.admit(state, obj, source)
            if k8s.deprecated(obj):
                answer.err(k8s.DEPRECATED_WARNING)
            verb = k8s.put(state, obj, ns.namespace, applied=True)
            done.append((kind, obj))
            if not ns.output:  # printed as it goes: a later failure keeps the earlier lines
                answer.out(f"{kind.singular}/{obj['metadata']['name']} {verb}")
        if ns.output:
            objs = [o for _, o in done]
            one = len(objs) == 1
            print_objects(answer, done[0][0], objs, ns.output, single=one, namespace=None)

    return run


def _admit_only(docs: list[tuple[str, dict[str, Any]]], answer: Answer) -> None:
    """``apply --dry-run=server``: what the server admits, nothing kept (``-o name`` lines)."""
    for source, obj in docs:
        kind = _applicable(source, obj)
        ray_k8s.check(obj, source)
        answer.out(f"{kind.singular}/{obj['metadata']['name']}")


def patch(args: list[str]) -> Handler:
    p = _parser("patch")
    p.add_argument("words", nargs="+")
    p.add_argument("--type", default="strategic")
    p.add_argument("-p", "--patch", required=True)
    p.add_argument("-o", "--output")
    ns = p.parse_args(args)
    kind, names = _kind_and_names(ns.words)
    if ns.type not in ("merge", "strategic"):
        raise ToolExit(
            f"error: the fake kubectl patches with --type merge or strategic, not {ns.type}\n", 1
        )
    try:
        body = json.loads(ns.patch)
    except json.JSONDecodeError:
        raise ToolExit(
            f'error: unable to parse "{ns.patch}": yaml: did not find expected node content\n', 1
        ) from None

    def run(state: State, answer: Answer) -> None:
        obj = k8s.get(state, kind, names[0], ns.namespace) if names else None
        if obj is None or kind.virtual:
            raise ToolExit(not_found(kind, names[0] if names else ""), 1)
        merged = k8s.merge_patch(obj, body)
        bad = [k for k, v in (merged.get("data") or {}).items() if not isinstance(v, str)]
        if kind.kind == "ConfigMap" and bad:
            raise ToolExit(
                "Error from server (BadRequest): json: cannot unmarshal number into Go "
                "struct field ConfigMap.data of type string\n",
                1,
            )
        verb = k8s.put(state, merged, ns.namespace)
        if ns.output:
            print_objects(answer, kind, [merged], ns.output, single=True, namespace=None)
        else:
            note = " (no change)" if verb == "unchanged" else ""
            answer.out(f"{kind.singular}/{names[0]} patched{note}")

    return run


def create(args: list[str]) -> Handler:
    p = _parser("create")
    p.add_argument("what", choices=["configmap", "cm"])
    p.add_argument("name")
    p.add_argument("--from-literal", action="append", default=[])
    p.add_argument("-o", "--output")
    ns = p.parse_args(args)
    data = dict(item.partition("=")[::2] for item in ns.from_literal)

    def run(state: State, answer: Answer) -> None:
        kind = k8s.KINDS[4]
        if k8s.get(state, kind, ns.name, ns.namespace) is not None:
            raise ToolExit(
                f'error: failed to create configmap: configmaps "{ns.name}" already exists\n', 1
            )
        obj = k8s.configmap(ns.name, data)
        k8s.put(state, obj, ns.namespace)
        if ns.output:
            print_objects(answer, kind, [obj], ns.output, single=True, namespace=None)
        else:
            answer.out(f"configmap/{ns.name} created")

    return run


def delete(args: list[str]) -> Handler:
    p = _parser("delete")
    p.add_argument("words", nargs="+")
    p.add_argument("--ignore-not-found", action="store_true")
    p.add_argument("--wait", default="true")
    ns = p.parse_args(args)
    kind, names = _kind_and_names(ns.words)

    def run(state: State, answer: Answer) -> None:
        for name in names:
            if kind.kind == "JobSet" and name in state["workloads"]:
                del state["workloads"][name]
            elif not kind.virtual and k8s.get(state, kind, name, ns.namespace) is not None:
                del state["k8s"][k8s.key(kind, name, ns.namespace)]
                ray_k8s.deleted(state, kind, name, ns.namespace)
            elif not ns.ignore_not_found:
                raise ToolExit(not_found(kind, name), 1)
            else:
                continue
            answer.out(f'{kind.singular} "{name}" deleted')

    return run


def config(args: list[str]) -> Handler:
    p = _parser("config")
    p.add_argument("what", choices=["current-context", "view"])
    p.add_argument("--minify", action="store_true")
    p.add_argument("--raw", action="store_true")
    ns = p.parse_args(args)

    def run(state: State, answer: Answer) -> None:
        context = f"gke_{state['project']}_{state['region']}_{state['cluster']['name']}"
        if ns.what == "current-context":
            answer.out(context)
            return
        view = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        }
        answer.out(yaml.safe_dump(view, sort_keys=False))

    return run


def version(args: list[str]) -> Handler:
    p = _parser("version")
    p.add_argument("--client", action="store_true")
    p.add_argument("-o", "--output")
    ns = p.parse_args(args)

    def run(state: State, answer: Answer) -> None:
        del state
        if ns.output == "json":
            answer.out(json.dumps({"clientVersion": {"gitVersion": "v1.34.1"}}, indent=2))
        else:
            answer.out("Client Version: v1.34.1\nKustomize Version: v5.7.1")

    return run


_HANDLERS: dict[str, Callable[[list[str]], Handler]] = {
    "get": get,
    "logs": logs,
    "apply": apply,
    "patch": patch,
    "create": create,
    "delete": delete,
    "config": config,
    "version": version,
}


_VALUE_FLAGS = frozenset(
    {
        "-n",
        "--namespace",
        "--context",
        "--kubeconfig",
        "-o",
        "--output",
        "-l",
        "--selector",
        "-c",
        "--container",
        "-f",
        "--filename",
        "-p",
        "--patch",
        "--type",
        "--request-timeout",
    }
)


def _verb_index(argv: list[str]) -> int | None:
    """Where the verb is: the first word that is neither a flag nor a flag's value."""
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in _VALUE_FLAGS:
            skip = True
        elif not arg.startswith("-"):
            return i
    return None


def _command(argv: list[str]) -> Handler:
    at = _verb_index(argv)
    if at is None:
        raise ToolExit(f"error: a command is required (the fake answers: {', '.join(_VERBS)})\n", 1)
    verb = argv[at]
    if verb not in _HANDLERS:
        raise ToolExit(f'Error: unknown command "{verb}" for "kubectl"\n', 1)
    return _HANDLERS[verb](argv[:at] + argv[at + 1 :])


def main(argv: list[str]) -> int:
    """Answer one kubectl command line (without the leading ``kubectl``)."""
    at = _verb_index(argv)
    if at is not None and argv[at] == "port-forward":  # runs until stopped: not under the lock
        return ray_k8s.port_forward_main(argv)
    return run_tool("kubectl", argv, _command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
