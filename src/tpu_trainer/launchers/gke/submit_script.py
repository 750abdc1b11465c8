"""Running the generated submit script until its workload exists, then beside the follow.

xpk's ``workload create`` goes on for a while after its ``kubectl apply`` made the JobSet: it
checks on that command only every 10 s, then looks for a monitoring dashboard. The run follows
the workload from the line that says it exists (:meth:`Submitter.says_submitted`) and waits for
the script's end before anything is torn down. A submitter whose output says nothing of the
kind is waited for to its end, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.infra.background import Background, Enough
from tpu_trainer.infra.runner import CommandResult, CommandRunner
from tpu_trainer.infra.xpk import xpk_scratch

SCRIPT_TIMEOUT_S = 1800.0


@dataclass
class SubmitScript:
    runner: CommandRunner
    script: Path
    env: Mapping[str, str]
    says_submitted: Enough
    display: Display
    _running: Background | None = field(default=None, init=False)
    _scratch: ExitStack = field(default_factory=ExitStack, init=False)

    def run(self) -> CommandResult | None:
        """Start the script and wait until its output says the workload exists (None: the
        script's last steps may still run; :meth:`finish` waits for them) or it ends without
        saying so (its result)."""
        folder = self._scratch.enter_context(xpk_scratch())  # the script's xpk leaves files
        argv = ["bash", str(self.script)]
        running = Background(
            self.runner,
            argv,
            self.says_submitted,
            env={**self.env, **folder},
            timeout=SCRIPT_TIMEOUT_S,
        ).start()
        try:
            result = running.wait()
        except BaseException:
            running.stop()
            self._scratch.close()
            raise
        if running.said_enough:  # whether the script still runs or has ended since
            self._running = running
            return None
        self._scratch.close()
        return result

    def finish(self) -> None:
        """Wait for the script's end after it said the workload exists. A failure after that
        point is shown, not raised: the workload was made and has been followed."""
        running, self._running = self._running, None
        if running is None:
            return
        try:
            result = running.finish()
        finally:
            self._scratch.close()
        if not result.ok:
            lines = [line for line in result.text().splitlines() if line.strip()]
            last = lines[-1][:300] if lines else ""
            self.display.warn(
                f"{self.script.name} exited {result.code} after the workload was submitted: {last}"
            )

    def stop(self) -> None:
        """Stop the script if it still runs (the run is ending early)."""
        running, self._running = self._running, None
        if running is None:
            return
        try:
            running.stop()
        finally:
            self._scratch.close()
