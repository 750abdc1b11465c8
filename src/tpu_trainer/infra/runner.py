"""The one way the tool runs gcloud, kubectl, xpk and friends: argv lists, never a shell.

``SubprocessRunner`` runs for real (with a timeout, optional line streaming, and a recorder that
sees every call with secrets redacted; a streamed command's result keeps the last
:data:`STREAMED_TAIL` characters of its standard output). ``DryRunRunner`` passes read-only commands through and
records, without running, everything that would change the cloud.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.redact import Redactor


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    seconds: float
    ran: bool = True
    """False when a dry run only recorded the command."""

    @property
    def ok(self) -> bool:
        return self.code == 0

    def text(self) -> str:
        return (self.stdout + "\n" + self.stderr).strip()


class CommandFailed(TpuTrainerError):  # noqa: N818 (reads as a sentence: raise CommandFailed)
    """A command that had to succeed did not."""

    def __init__(self, result: CommandResult, fix: str = "") -> None:
        shown = key_lines(result.stderr) or key_lines(result.stdout)
        super().__init__(
            f"`{' '.join(result.argv[:4])} ...` failed (exit {result.code}):\n" + "\n".join(shown),
            fix=fix
            or _known_fix(result)
            or "see the message above; `tpu-trainer runs` lists "
            "the runs and `tpu-trainer show <run id>` every command a run ran",
        )
        self.result = result


NOT_LOGGED_IN = "You do not currently have an active account selected"
LOGIN_FIX = (
    "run `gcloud auth login` (or `gcloud config set account ACCOUNT` to use an account you "
    "already logged in with), then run the command again"
)


def _known_fix(result: CommandResult) -> str:
    return LOGIN_FIX if NOT_LOGGED_IN in result.text() else ""


def key_lines(text: str, tail: int = 8) -> list[str]:
    """The lines that say what went wrong: every ``ERROR:`` line with the lines after it, and
    the last ``tail`` lines; blank lines dropped, nothing cut out of the middle of a message."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    keep = set(range(max(0, len(lines) - tail), len(lines)))
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("ERROR:", "Error:", "error:")):
            keep.update(range(i, min(len(lines), i + tail)))
    return [lines[i] for i in sorted(keep)]


LineSink = Callable[[str, str], None]
"""Called with (stream name, line) for each output line while a command runs."""
Recorder = Callable[[CommandResult], None]


class CommandRunner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        on_line: LineSink | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
        cancel: threading.Event | None = None,
        stdin: str | None = None,
    ) -> CommandResult: ...


@dataclass
class SubprocessRunner:
    """Runs commands for real."""

    env: Mapping[str, str] | None = None
    """Base environment (default: this process's)."""
    recorder: Recorder | None = None
    redactor: Redactor = field(default_factory=Redactor)
    default_timeout: float = 3600.0

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        on_line: LineSink | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
        cancel: threading.Event | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        """Run ``argv``; ``cancel``, when set by another thread, stops the command (exit 130).
        ``stdin`` is written to the command's standard input (a manifest for ``-f -``), which
        is otherwise empty."""
        if isinstance(argv, str):  # a shell string is a programming error
            raise TypeError("argv must be a list of arguments, not a string")
        full_env = {**(self.env if self.env is not None else os.environ), **(env or {})}
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=full_env,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            result = CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found", 0.0)
            self._record(result)
            if check:
                raise CommandFailed(result, fix=f"install {argv[0]} and put it on PATH") from None
            return result
        if stdin is not None:
            _feed(proc, stdin)
        out, err = _collect(proc, on_line, timeout or self.default_timeout, cancel)
        code = proc.returncode if proc.returncode is not None else 124
        result = CommandResult(tuple(argv), code, out, err, time.monotonic() - started)
        self._record(result)
        if check and not result.ok:
            raise CommandFailed(self._redacted(result))
        return result

    def _redacted(self, r: CommandResult) -> CommandResult:
        red = self.redactor
        return CommandResult(
            tuple(red.argv(r.argv)), r.code, red(r.stdout), red(r.stderr), r.seconds, r.ran
        )

    def _record(self, result: CommandResult) -> None:
        if self.recorder is not None:
            self.recorder(self._redacted(result))


STREAMED_TAIL = 1 << 20
"""Characters of a streamed command's standard output its result keeps: the last ones (every
line went to ``on_line`` as it came), so a log followed for a week stays out of memory."""


class _Kept:
    """The lines of one output stream, or only the last ``limit`` characters of them."""

    def __init__(self, limit: int | None) -> None:
        self.lines: deque[str] = deque()
        self.size, self.limit = 0, limit

    def add(self, line: str) -> None:
        self.lines.append(line)
        if self.limit is None:
            return
        self.size += len(line)
        while self.size > self.limit and len(self.lines) > 1:
            self.size -= len(self.lines.popleft())


def _feed(proc: subprocess.Popen[str], text: str) -> None:
    """Write ``text`` to the command's standard input from a thread, then close it (a
    command that exits without reading it all is not an error here)."""

    def write() -> None:
        assert proc.stdin is not None  # noqa: S101 (a pipe was requested)
        try:
            proc.stdin.write(text)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            return

    threading.Thread(target=write, daemon=True).start()


def _collect(
    proc: subprocess.Popen[str],
    on_line: LineSink | None,
    timeout: float,
    cancel: threading.Event | None,
) -> tuple[str, str]:
    streamed = STREAMED_TAIL if on_line is not None else None
    chunks = {"stdout": _Kept(streamed), "stderr": _Kept(None)}

    def pump(name: str) -> None:
        stream = proc.stdout if name == "stdout" else proc.stderr
        assert stream is not None  # noqa: S101 (both pipes were requested)
        for line in stream:
            chunks[name].add(line)
            if on_line is not None:
                on_line(name, line.rstrip("\n"))

    threads = [threading.Thread(target=pump, args=(n,), daemon=True) for n in chunks]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    stopped = ""
    try:
        stopped = _wait(proc, deadline, timeout, cancel)
    except BaseException:  # Ctrl-C or SIGTERM in this process: the command goes too
        _kill(proc)
        raise
    if stopped:
        _kill(proc)
        proc.wait()
        chunks["stderr"].add(stopped)
    for t in threads:
        t.join(timeout=5)
    if stopped:
        proc.returncode = 130 if "stopped" in stopped else 124
    return "".join(chunks["stdout"].lines), "".join(chunks["stderr"].lines)


def _wait(
    proc: subprocess.Popen[str], deadline: float, timeout: float, cancel: threading.Event | None
) -> str:
    """Wait for ``proc``; returns why it was stopped early ("" when it ended by itself). The
    end is seen at once (a pidfd where the system has them; else ``Popen.wait``'s polling, up
    to 50 ms late), and ``cancel`` and the deadline are looked at every 0.1 s."""
    ended = _exit_watch(proc.pid)
    try:
        while proc.poll() is None:
            if cancel is not None and cancel.is_set():
                return "\n[tpu-trainer] stopped\n"
            if time.monotonic() > deadline:
                return f"\n[tpu-trainer] timed out after {timeout:.0f} s\n"
            if ended is not None:
                select.select([ended], [], [], 0.1)
                continue
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
        return ""
    finally:
        if ended is not None:
            os.close(ended)


def _exit_watch(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` exits (Linux 5.3+), or None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _kill(proc: subprocess.Popen[str]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


_READ_ONLY_VERBS = frozenset({"describe", "list", "get", "logs", "get-credentials", "inspect"})


def is_read_only(argv: Sequence[str]) -> bool:
    """Whether a gcloud/kubectl/xpk command only reads (safe to run in a dry run)."""
    words = [a for a in argv if not a.startswith("-")]
    tool = words[0].rsplit("/", 1)[-1] if words else ""
    if tool == "kubectl":
        return len(words) > 1 and words[1] in ("get", "logs", "describe")
    if tool == "xpk":
        return len(words) > 2 and words[1] == "workload" and words[2] == "list"
    return bool(_READ_ONLY_VERBS.intersection(words[1:]))


@dataclass
class DryRunRunner:
    """Runs read-only commands through ``inner``; records the others and answers success."""

    inner: CommandRunner
    recorded: list[tuple[str, ...]] = field(default_factory=list)
    on_record: Callable[[tuple[str, ...]], None] | None = None

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        on_line: LineSink | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
        cancel: threading.Event | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        if is_read_only(argv):
            return self.inner.run(
                argv,
                timeout=timeout,
                on_line=on_line,
                env=env,
                check=check,
                cancel=cancel,
                stdin=stdin,
            )
        self.recorded.append(tuple(argv))
        if self.on_record is not None:
            self.on_record(tuple(argv))
        return CommandResult(tuple(argv), 0, "", "", 0.0, ran=False)
