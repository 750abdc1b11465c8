"""A command run beside the caller, who goes on once a line of its output says enough.

A submit script's work is done, as far as the run is concerned, when its tool says the workload
exists; what the tool does after that (xpk waits out the poll of its ``kubectl apply`` and looks
for a monitoring dashboard) need not hold the run back. :class:`Background` runs the command in a
thread through the same runner as every other command (recorded the same way) and tells its
caller when the line came, or that the command ended first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tpu_trainer.infra.runner import CommandResult, CommandRunner

Enough = Callable[[str], bool]
"""Whether one line of the command's standard output says the caller may go on."""


@dataclass
class Background:
    runner: CommandRunner
    argv: Sequence[str]
    enough: Enough
    env: Mapping[str, str] | None = None
    timeout: float = 1800.0
    _woken: threading.Event = field(default_factory=threading.Event, init=False)
    _said: threading.Event = field(default_factory=threading.Event, init=False)
    _cancel: threading.Event = field(default_factory=threading.Event, init=False)
    _result: CommandResult | None = field(default=None, init=False)
    _error: BaseException | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def start(self) -> Background:
        thread = threading.Thread(target=self._run, name=f"{self.argv[0]} beside", daemon=True)
        self._thread = thread
        thread.start()
        return self

    def _run(self) -> None:
        def on_line(stream: str, line: str) -> None:
            if stream == "stdout" and not self._said.is_set() and self.enough(line):
                self._said.set()
                self._woken.set()

        try:
            self._result = self.runner.run(
                self.argv, env=self.env, timeout=self.timeout, on_line=on_line, cancel=self._cancel
            )
        except BaseException as e:  # handed to the caller, in its own thread
            self._error = e
        finally:
            self._woken.set()

    def wait(self) -> CommandResult | None:
        """Until the line that says enough (None: the command still runs) or the command's end
        (its result, whether that line came or not)."""
        self._woken.wait()
        if self._said.is_set() and self._thread is not None and self._thread.is_alive():
            return None
        return self.finish()

    def finish(self) -> CommandResult:
        """Wait for the command's end: its result."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise RuntimeError("the command was never started")
        return self._result

    def stop(self) -> None:
        """Stop the command if it still runs (exit 130), and wait for it."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def said_enough(self) -> bool:
        return self._said.is_set()
