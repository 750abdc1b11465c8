"""A Rich implementation of the pipeline's Display: messages, and a live line for long waits."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


class RichDisplay:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self._status: object | None = None

    def info(self, message: str) -> None:
        self._stop()
        self.console.print(escape(message))

    def warn(self, message: str) -> None:
        self._stop()
        self.console.print(f"[yellow]warning:[/] {escape(message)}")

    def waiting(self, label: str, elapsed_s: float) -> None:
        minutes, seconds = divmod(int(elapsed_s), 60)
        text = f"{escape(label)} — waited {minutes}m{seconds:02d}s"
        if self._status is None:
            status = self.console.status(text)
            status.start()
            self._status = status
        else:
            self._status.update(text)  # type: ignore[attr-defined]

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()  # type: ignore[attr-defined]
            self._status = None
