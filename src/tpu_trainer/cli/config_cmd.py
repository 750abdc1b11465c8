"""``tpu-trainer config init|show``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tpu_trainer.cli.common import ConfigOpt, JsonOpt

app = typer.Typer(help="Write or show the configuration.", no_args_is_help=True)


@app.command("init")
def init(
    path: Annotated[Path | None, typer.Option("--path", help="Where to write it.")] = None,
    project_id: Annotated[str | None, typer.Option("--project-id")] = None,
    cluster_name: Annotated[str | None, typer.Option("--cluster-name")] = None,
    reservation: Annotated[
        list[str] | None, typer.Option("--reservation", help="Repeat, highest priority first.")
    ] = None,
    default_zone: Annotated[str | None, typer.Option("--default-zone")] = None,
    base_output_dir: Annotated[str | None, typer.Option("--base-output-dir")] = None,
    workload_image: Annotated[str | None, typer.Option("--workload-image")] = None,
    tpu_recipes_path: Annotated[str | None, typer.Option("--tpu-recipes-path")] = None,
) -> None:
    """Write a configuration file (never over an existing one)."""
    from tpu_trainer.app.files import write_generated
    from tpu_trainer.config.load import read_config, render_template, search_path
    from tpu_trainer.errors import ConfigError

    target = path or search_path()[0]
    if target.exists():
        raise ConfigError(
            f"{target} already exists; not replacing it",
            fix="edit it, or choose another file with --path",
        )
    values = {
        "project_id": project_id or "",
        "cluster_name": cluster_name or "",
        "reservations": "[" + ", ".join(reservation) + "]" if reservation else "",
        "default_zone": default_zone or "",
        "base_output_dir": base_output_dir or "",
        "workload_image": workload_image or "",
        "tpu_recipes_path": tpu_recipes_path or "",
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    write_generated(target, render_template(values), force=False)
    read_config(target, require=False)  # what was written must read back
    typer.echo(f"wrote {target}")
    missing = [k for k, v in values.items() if not v and k != "tpu_recipes_path"]
    if missing:
        typer.echo(f"still to fill in: {', '.join(missing)}")


@app.command("show")
def show(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Show the configuration in force and where each value came from."""
    from tpu_trainer.config.load import locate, read_config
    from tpu_trainer.config.model import KEY_NAMES

    found = locate(config)
    if found.path is None:
        typer.echo("no configuration found; run `tpu-trainer config init`")
        raise typer.Exit(1)
    cfg = read_config(found.path, require=False)
    rows = []
    for key in KEY_NAMES:
        value = getattr(cfg, key)
        if isinstance(value, tuple):
            value = ", ".join(r.name + (f" ({r.zone})" if r.zone else "") for r in value)
        source = cfg.sources.get(key)
        rows.append(
            (key, "" if value is None else str(value), str(source) if source else "not set")
        )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "file": str(found.path),
                    "found_by": found.how,
                    "values": {k: {"value": v, "source": s} for k, v, s in rows},
                },
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{found.path} ({found.how})")
    for col in ("key", "value", "from"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
