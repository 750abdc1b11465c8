"""SIGTERM as an exception, so a run unwinds (and tears down) as it does on Ctrl-C."""

from __future__ import annotations

from types import FrameType


class Interrupted(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so teardown runs."""


def on_sigterm(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
    """The SIGTERM handler: unwind (running every teardown on the way) like Ctrl-C."""
    raise Interrupted
