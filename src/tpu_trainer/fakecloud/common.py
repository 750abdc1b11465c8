"""What every fake tool shares: how an answer is written, how a failure is raised, and the
wrapper that records the call, runs the command under the state lock and waits the latency."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from tpu_trainer.fakecloud.state import FakeCloudError, State, state_path, transaction


class ToolExit(Exception):  # noqa: N818 (an exit, not an error: success ends this way too)
    """Ends a command: what it printed on stderr, and its exit code."""

    def __init__(self, stderr: str, code: int = 1, stdout: str = "") -> None:
        super().__init__(stderr)
        self.stderr, self.code, self.stdout = stderr, code, stdout


@dataclass
class Answer:
    """What a command prints, collected while the state is locked and written afterwards."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    code: int = 0
    latency: str = "default"
    """Which scenario latency applies: ``describe``, ``list`` or ``default``."""
    after: Callable[[Answer], None] | None = None
    """Runs once the state is saved and unlocked, before the answer is printed: a command
    that waits for another command to change the state (a program stopped by its pid)."""

    def out(self, text: str) -> None:
        self.stdout.append(text if text.endswith("\n") else text + "\n")

    def err(self, text: str) -> None:
        self.stderr.append(text if text.endswith("\n") else text + "\n")


Handler = Callable[[State, Answer], None]


class StrictParser(argparse.ArgumentParser):
    """argparse without abbreviations whose errors become a tool-specific ``ToolExit``."""

    def __init__(self, on_error: Callable[[str], NoReturn], **kwargs: object) -> None:
        super().__init__(allow_abbrev=False, add_help=False, **kwargs)  # type: ignore[arg-type]
        self._on_error = on_error

    def error(self, message: str) -> NoReturn:
        self._on_error(message)


def run_tool(tool: str, argv: list[str], command: Callable[[list[str]], Handler]) -> int:
    """Record ``argv``, build the handler (parsing errors end here), run it under the lock,
    sleep the scenario latency, then print. Returns the exit code."""
    answer = Answer()
    try:
        path = state_path()
    except FakeCloudError as e:
        sys.stderr.write(f"fake {tool}: {e}\n")
        return 1
    try:
        with transaction(path, [tool, *argv]) as state:
            latencies = dict(state.get("latencies") or {})
            try:
                handler = command(argv)
                handler(state, answer)
            except ToolExit as e:
                if e.stdout:
                    answer.out(e.stdout)
                if e.stderr:
                    answer.err(e.stderr)
                answer.code = e.code
    except FakeCloudError as e:
        sys.stderr.write(f"fake {tool}: {e}\n")
        return 1
    delay = float(latencies.get(answer.latency) or latencies.get("default") or 0.0)
    if delay > 0:
        time.sleep(delay)
    if answer.after is not None:
        answer.after(answer)
    sys.stdout.write("".join(answer.stdout))
    sys.stderr.write("".join(answer.stderr))
    sys.stdout.flush()
    sys.stderr.flush()
    return answer.code
