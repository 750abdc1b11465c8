"""The TPU VM cloud adapter: gcloud for TPU VMs, a thin client over the argv built in
:mod:`tpu_trainer.launchers.tpu_vm.spec`."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tpu_trainer.infra.gcloud import is_not_found, printed_object
from tpu_trainer.infra.runner import CommandFailed, CommandResult, CommandRunner, LineSink
from tpu_trainer.launchers.tpu_vm.spec import (
    TpuNode,
    TpuVmSpec,
    create_argv,
    delete_argv,
    describe_argv,
    load_json,
    parse_node,
    queued_delete_argv,
    queued_describe_argv,
    queued_state,
    scp_argv,
    ssh_argv,
)


def created_node(result: CommandResult) -> TpuNode | None:
    """The node a successful ``tpu-vm create --format=json`` printed (gcloud waits for the
    operation, whose response is the node), or None when its output is not one."""
    data = printed_object(result, "state")
    return None if data is None else parse_node(data)


@dataclass
class TpuVmCloud:
    runner: CommandRunner

    def create(self, spec: TpuVmSpec) -> CommandResult:
        """Create the VM (or its queued resource); creating waits for the operation. A VM's
        create asks for JSON: its output is then the node the operation made (see
        :func:`created_node`)."""
        argv = create_argv(spec)
        if not spec.queued:
            at = argv.index(spec.name) + 1
            argv = [*argv[:at], "--format=json", *argv[at:]]
        return self.runner.run(argv, timeout=3 * 3600)

    def node(self, name: str, zone: str, project: str) -> TpuNode | None:
        """The VM as described now, or None when it does not exist."""
        argv = describe_argv(name, zone, project)
        result = self.runner.run(argv, timeout=300)
        if not result.ok:
            if is_not_found(result):
                return None
            raise CommandFailed(result)
        return parse_node(load_json(result.stdout, argv))

    def queued_state(self, name: str, zone: str, project: str) -> str | None:
        """The queued resource's state, or None when it does not exist."""
        argv = queued_describe_argv(name, zone, project)
        result = self.runner.run(argv, timeout=300)
        if not result.ok:
            if is_not_found(result):
                return None
            raise CommandFailed(result)
        return queued_state(load_json(result.stdout, argv))

    def delete(self, name: str, zone: str, project: str) -> CommandResult:
        return self.runner.run(delete_argv(name, zone, project), timeout=3600)

    def delete_queued(self, name: str, zone: str, project: str) -> CommandResult:
        return self.runner.run(queued_delete_argv(name, zone, project), timeout=3600)

    def scp(self, spec: TpuVmSpec, files: Sequence[str], remote_dir: str) -> CommandResult:
        return self.runner.run(scp_argv(spec, files, remote_dir), timeout=1800)

    def ssh(
        self,
        spec: TpuVmSpec,
        command: str,
        output_dir: str,
        *,
        timeout: float,
        send_env: Mapping[str, str] | None = None,
        cancel: threading.Event | None = None,
        on_line: LineSink | None = None,
    ) -> CommandResult:
        """Run ``command`` on every worker; ``send_env``'s values go to gcloud's environment
        (and from there through ssh), never into the argv."""
        env = dict(send_env or {})
        return self.runner.run(
            ssh_argv(spec, command, output_dir, tuple(env)),
            timeout=timeout,
            env=env,
            cancel=cancel,
            on_line=on_line,
        )
