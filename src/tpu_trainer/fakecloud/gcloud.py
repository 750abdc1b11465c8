"""The stand-in ``gcloud``: what is no Google API call (``tpu-vm ssh``/``scp``) and the
credential questions (``auth``, ``config``).

GKE and Compute Engine are not imitated: in a rehearsal the real gcloud talks to the emulated
APIs (``simcloud``), and ``gcloud_dispatch`` hands it those commands.
"""

from __future__ import annotations

import sys

from tpu_trainer.fakecloud import tpu_vm
from tpu_trainer.fakecloud.common import run_tool
from tpu_trainer.fakecloud.gcloud_auth import TREE as ACCOUNT_TREE
from tpu_trainer.fakecloud.gcloud_auth import with_account
from tpu_trainer.fakecloud.gcloud_cli import Tree, resolve

TREE: Tree = {"compute": {"tpus": tpu_vm.tree()}}

GCLOUD: Tree = {**with_account(TREE), **ACCOUNT_TREE}
"""Every command; all but ``auth`` and ``config`` need an active account."""


def main(argv: list[str]) -> int:
    """Answer one gcloud command line (without the leading ``gcloud``)."""
    return run_tool("gcloud", argv, lambda a: resolve(GCLOUD, list(a)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
