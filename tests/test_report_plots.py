"""The README's charts: step time, loss and TFLOP/s per chip as PNG files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_report import make_run
from tpu_trainer.report import write_plots

pytestmark = pytest.mark.unit

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_write_plots_writes_three_valid_pngs(tmp_path: Path) -> None:
    from matplotlib import image

    paths = write_plots(make_run(), tmp_path)
    assert [p.name for p in paths] == [
        "deepseek3-671b-a1b2c3d4-step_time.png",
        "deepseek3-671b-a1b2c3d4-loss.png",
        "deepseek3-671b-a1b2c3d4-tflops_chip.png",
    ]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == PNG_SIGNATURE
        assert b"Software" not in data
        pixels = image.imread(path)
        assert pixels.shape == (400, 700, 4)
        assert pixels.std() > 0.01
    again = tmp_path / "again"
    again.mkdir()
    assert [p.read_bytes() for p in write_plots(make_run(), again)] == [
        p.read_bytes() for p in paths
    ]


def test_write_plots_without_steps_writes_nothing(tmp_path: Path) -> None:
    assert write_plots(make_run(steps=()), tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_importing_the_report_does_not_load_matplotlib() -> None:
    code = "import sys, tpu_trainer.report; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
