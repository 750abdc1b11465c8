"""The tool's own xpk: found in the cache or installed there once, never left half-made."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tpu_trainer.infra.runner import CommandResult, LineSink
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.runtime.manager import MARKER, RuntimeSetupError
from tpu_trainer.runtime.xpk_runtime import XPK_ENV, ensure_xpk, install_xpk

pytestmark = pytest.mark.unit

OFFLINE = (
    "ERROR: Could not find a version that satisfies the requirement xpk==1.16.0 (from versions: "
    "none)\nERROR: No matching distribution found for xpk==1.16.0\n"
)


@dataclass
class FakePip:
    """``python -m venv`` makes a folder; ``pip install`` adds ``bin/xpk`` or fails like pip."""

    failure: str = ""
    pip_seconds: float = 0.0
    calls: list[tuple[str, ...]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,  # noqa: ARG002
        on_line: LineSink | None = None,
        env: Mapping[str, str] | None = None,  # noqa: ARG002
        check: bool = False,  # noqa: ARG002
        cancel: threading.Event | None = None,  # noqa: ARG002
        stdin: str | None = None,  # noqa: ARG002
    ) -> CommandResult:
        with self.lock:
            self.calls.append(tuple(argv))
        if tuple(argv[1:3]) == ("-m", "venv"):
            (Path(argv[3]) / "bin").mkdir(parents=True)
            (Path(argv[3]) / "bin" / "python").write_text("", encoding="utf-8")
            return CommandResult(tuple(argv), 0, "", "", 0.0)
        if "pip" in argv:
            time.sleep(self.pip_seconds)
            if self.failure:
                return CommandResult(tuple(argv), 1, "", self.failure, 0.0)
            venv = Path(argv[0]).parent.parent
            (venv / "bin" / "xpk").write_text("#!/bin/sh\n", encoding="utf-8")
            if on_line is not None:
                on_line("stdout", "Successfully installed xpk-1.16.0")
            return CommandResult(tuple(argv), 0, "Successfully installed xpk-1.16.0", "", 0.0)
        return CommandResult(tuple(argv), 0, "", "", 0.0)  # the import check

    def pips(self) -> int:
        return sum("pip" in c for c in self.calls)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"TPU_TRAINER_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin"}


def test_installs_once_then_reuses_with_progress(tmp_path: Path) -> None:
    pip, lines = FakePip(), list[str]()
    first = install_xpk(pip, lines.append, _env(tmp_path))
    again = install_xpk(pip, lines.append, _env(tmp_path))
    venv = tmp_path / "cache" / "xpk-1.16.0"
    assert first == again == venv / "tpu-trainer-bin"
    assert (first / "xpk").resolve() == venv / "bin" / "xpk"
    assert (venv / MARKER).is_file()
    assert pip.pips() == 1
    assert lines[0].startswith("installing xpk 1.16.0 into ")
    assert any("Successfully installed xpk-1.16.0" in line for line in lines)
    assert not (tmp_path / "cache" / "xpk-1.16.0.partial").exists()


def test_two_callers_at_once_install_once(tmp_path: Path) -> None:
    pip = FakePip(pip_seconds=0.5)
    found: list[Path] = []
    threads = [
        threading.Thread(target=lambda: found.append(install_xpk(pip, print, _env(tmp_path))))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(found) == 2
    assert found[0] == found[1]
    assert pip.pips() == 1


@pytest.mark.parametrize(
    ("failure", "said", "fix"),
    [
        (OFFLINE, "pip cannot reach its package index", "PIP_INDEX_URL"),
        ("ERROR: disk quota exceeded\n", "disk quota exceeded", "nothing was left half-made"),
    ],
)
def test_failed_install_leaves_no_half_venv(
    tmp_path: Path, failure: str, said: str, fix: str
) -> None:
    with pytest.raises(RuntimeSetupError) as err:
        install_xpk(FakePip(failure=failure), print, _env(tmp_path))
    assert said in err.value.message
    assert fix in (err.value.fix or "")
    assert "pip install xpk==1.16.0" in (err.value.fix or "")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["xpk-1.16.0.lock"]
    pip = FakePip()
    install_xpk(pip, print, _env(tmp_path))  # the next try starts clean and succeeds
    assert pip.pips() == 1


def test_a_working_venv_made_by_hand_is_adopted_not_rebuilt(tmp_path: Path) -> None:
    venv = tmp_path / "cache" / "xpk-1.16.0"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "xpk"):
        (venv / "bin" / name).write_text("", encoding="utf-8")
    pip = FakePip()
    assert install_xpk(pip, print, _env(tmp_path)) == venv / "tpu-trainer-bin"
    assert pip.pips() == 0
    assert (venv / MARKER).is_file()
    assert (venv / "bin" / "xpk").read_text(encoding="utf-8") == ""


def test_an_xpk_named_in_the_environment_wins(tmp_path: Path) -> None:
    stand_in = tmp_path / "bin" / "xpk"
    stand_in.parent.mkdir()
    stand_in.write_text("", encoding="utf-8")
    pip = FakePip()
    env = {**_env(tmp_path), XPK_ENV: str(stand_in)}
    assert ensure_xpk(pip, print, env) == stand_in.parent
    assert pip.calls == []


def test_the_client_runs_xpk_under_the_path_it_is_given() -> None:
    seen: list[Mapping[str, str] | None] = []

    class Spy(FakePip):
        def run(self, argv: Sequence[str], **kw: object) -> CommandResult:
            seen.append(kw.get("env"))  # type: ignore[arg-type]
            return super().run(argv)

    spy = Spy()
    Xpk(spy, search_path=lambda: "/opt/xpk-bin:/usr/bin").run(["xpk", "workload", "list"])
    assert spy.calls == [("xpk", "workload", "list")]
    (env,) = seen
    assert env is not None
    scratch = env["TMPDIR"]  # a temporary folder of its own, removed once xpk has ended
    assert env == {"TELEMETRY_ENABLED": "false", "PATH": "/opt/xpk-bin:/usr/bin", "TMPDIR": scratch}
    assert Path(scratch).name.startswith("tpu-trainer-xpk-") and not Path(scratch).exists()


def test_the_services_run_the_tools_xpk_and_a_fake_runner_keeps_its_path(tmp_path: Path) -> None:
    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.app.services import Services
    from tpu_trainer.infra.runner import DryRunRunner, SubprocessRunner

    stand_in = tmp_path / "shims" / "xpk"
    stand_in.parent.mkdir()
    stand_in.write_text("", encoding="utf-8")
    env = {**_env(tmp_path), XPK_ENV: str(stand_in)}
    display = SilentDisplay()
    for runner in (SubprocessRunner(env=env), DryRunRunner(SubprocessRunner(env=env))):
        xpk = Services(runner, None, display, "demo-project").xpk  # type: ignore[arg-type]
        assert xpk.search_path is not None
        assert xpk.search_path() == f"{stand_in.parent}:/usr/bin"
    assert Services(FakePip(), None, display, "p").xpk.search_path is None  # type: ignore[arg-type]


def test_a_dry_run_installs_no_xpk_and_uses_one_already_there(tmp_path: Path) -> None:
    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.app.services import Services
    from tpu_trainer.infra.runner import DryRunRunner, SubprocessRunner
    from tpu_trainer.runtime.xpk_runtime import xpk_bin_dir

    env = _env(tmp_path)
    dry = Services(DryRunRunner(SubprocessRunner(env=env)), None, SilentDisplay(), "p")  # type: ignore[arg-type]
    search = dry.xpk.search_path
    assert search is not None
    assert search() == "/usr/bin"  # nothing installed: PATH as it is
    assert not (tmp_path / "cache").exists()  # and nothing made
    ensure_xpk(FakePip(), lambda _line: None, env)  # installed by a real (not dry) run
    assert search() == f"{xpk_bin_dir(env)}:/usr/bin"
