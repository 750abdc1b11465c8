"""``python -m tpu_trainer.fakecloud <gcloud|gcluster> ARGS...``: one fake tool call."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Dispatch to the fake tool named by ``argv[0]``."""
    if not argv or argv[0] not in ("gcloud", "gcluster"):
        sys.stderr.write("usage: python -m tpu_trainer.fakecloud {gcloud,gcluster} ARGS...\n")
        return 2
    tool, rest = argv[0], argv[1:]
    if tool == "gcloud":
        from tpu_trainer.fakecloud.gcloud_dispatch import main as run
    else:
        from tpu_trainer.fakecloud.gcluster import main as run
    return run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
