"""gcloud's credentials: ``auth list``, ``config get account``, and the error every other command
gives when no account is active (the scenario's ``account: null``)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit
from tpu_trainer.fakecloud.gcloud_cli import Ctx, Leaf, Tree
from tpu_trainer.fakecloud.state import State

NO_ACCOUNT = (
    "You do not currently have an active account selected.\n"
    "Please run:\n\n"
    "  $ gcloud auth login\n\n"
    "to obtain new credentials.\n\n"
    "If you have already logged in with a different account, run:\n\n"
    "  $ gcloud config set account ACCOUNT\n\n"
    "to select an already authenticated account to use.\n"
)
_NO_CREDENTIALED = (
    "\nNo credentialed accounts.\n\nTo login, run:\n  $ gcloud auth login `ACCOUNT`\n"
)


def needs_account(ctx: Ctx, handler: Handler) -> Handler:
    """``handler``, refused as gcloud refuses it while no account is active."""

    def run(state: State, answer: Answer) -> None:
        if "account" in state and not state["account"]:
            raise ToolExit(f"ERROR: ({ctx.command}) {NO_ACCOUNT}", 1)
        handler(state, answer)

    return run


def with_account(tree: Tree) -> Tree:
    """Every command of ``tree`` needing an active account."""

    def wrap(leaf: Leaf) -> Leaf:
        return lambda ctx, args: needs_account(ctx, leaf(ctx, args))

    return {k: with_account(v) if isinstance(v, Mapping) else wrap(v) for k, v in tree.items()}


def auth_list(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("--filter-account")
    p.parse_args(args)

    def run(state: State, answer: Answer) -> None:
        account = state.get("account")
        found = [{"account": account, "status": "ACTIVE"}] if account else []
        if ctx.fmt and ctx.fmt.startswith("json"):
            answer.out(json.dumps(found, indent=2))
        elif account:
            answer.out(f"Credentialed Accounts\nACTIVE  ACCOUNT\n*       {account}\n")
        if not found:
            answer.err(_NO_CREDENTIALED)

    return run


def config_get(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("property")
    ns = p.parse_args(args)

    def run(state: State, answer: Answer) -> None:
        value = {"account": state.get("account"), "project": state["project"]}.get(ns.property)
        if value:
            answer.out(str(value))
        else:
            answer.err("(unset)")

    return run


TREE: Tree = {"auth": {"list": auth_list}, "config": {"get": config_get, "get-value": config_get}}
