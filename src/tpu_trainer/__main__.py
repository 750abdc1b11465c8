"""Allow ``python -m tpu_trainer``."""

from tpu_trainer.cli.main import run

run()
