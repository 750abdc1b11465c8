"""What the pipeline tells the user while it works (the CLI draws it; tests record it)."""

from __future__ import annotations

from typing import Protocol


class Display(Protocol):
    def info(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...

    def waiting(self, label: str, elapsed_s: float) -> None:
        """Called repeatedly during a long wait, with the time waited so far."""


class SilentDisplay:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def info(self, message: str) -> None:
        self.messages.append(message)

    def warn(self, message: str) -> None:
        self.messages.append("warning: " + message)

    def waiting(self, label: str, elapsed_s: float) -> None:  # noqa: ARG002
        return
