"""``tpu-trainer runtime install|list|remove``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tpu_trainer.cli.common import JsonOpt

app = typer.Typer(
    help="Framework runtimes (virtual environments kept in the cache folder).", no_args_is_help=True
)


@app.command("install")
def install(
    name: Annotated[
        str, typer.Argument(help="Runtime to install: maxtext, tunix, ray, hf or xpk.")
    ] = "maxtext",
) -> None:
    """Create a runtime (once; reused after that)."""
    from tpu_trainer.errors import InputError
    from tpu_trainer.infra.runner import SubprocessRunner
    from tpu_trainer.runtime.manager import RAY, RUNTIMES
    from tpu_trainer.runtime.manager import install as do_install

    if name == "xpk":
        from tpu_trainer.runtime.xpk_runtime import install_xpk

        folder = install_xpk(SubprocessRunner(), lambda line: typer.echo(line, err=True))
        typer.echo(f"xpk: {folder / 'xpk'}")
        return
    if name == RAY.name:
        from tpu_trainer.runtime.ray_runtime import install_ray

        python = install_ray(SubprocessRunner(), lambda line: typer.echo(line, err=True))
        typer.echo(f"{RAY.key} (on {RUNTIMES['maxtext'].key}): {python}")
        return
    from tpu_trainer.frameworks.hf.runtime import HF

    spec = {**RUNTIMES, HF.name: HF}.get(name)
    if spec is None:
        known = ", ".join([*RUNTIMES, RAY.name, HF.name, "xpk"])
        raise InputError(f"no runtime called {name}", fix=f"use one of: {known}")
    python = do_install(spec, SubprocessRunner(), lambda line: typer.echo(line, err=True))
    typer.echo(f"{spec.key}: {python}")


@app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """The runtimes installed."""
    from tpu_trainer.runtime.manager import installed

    found = installed()
    if as_json:
        typer.echo(
            json.dumps([{"key": i.key, "path": str(i.path), **i.info} for i in found], indent=2)
        )
        return
    if not found:
        typer.echo("no runtimes installed (`tpu-trainer runtime install maxtext`)")
    for item in found:
        typer.echo(f"{item.key}\t{item.path}")


@app.command("remove")
def remove(key: Annotated[str, typer.Argument(help="e.g. maxtext-0.2.5")]) -> None:
    """Delete an installed runtime."""
    from tpu_trainer.runtime.manager import remove as do_remove

    typer.echo(f"removed {do_remove(key)}")
