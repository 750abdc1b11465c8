"""Read a recipe: its text, with the errors a user can act on, and the recipe model."""

from __future__ import annotations

from collections.abc import Mapping

from tpu_trainer.errors import InputError
from tpu_trainer.recipes.benchmark_invocation import mentions_runner
from tpu_trainer.recipes.recipe import Recipe
from tpu_trainer.recipes.resolve import RECIPE_FILE, RecipeRef


def read_recipe_file(ref: RecipeRef) -> str:
    """The script's text (UTF-8); an unreadable or binary file is an :class:`InputError`."""
    try:
        return ref.script.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(
            f"{ref.script} is not UTF-8 text", fix="is this a recipe script?"
        ) from None
    except OSError as e:
        raise InputError(
            f"{ref.script}: cannot read ({e.strerror})", fix="check permissions"
        ) from None


def read_recipe(ref: RecipeRef, variables: Mapping[str, str] | None = None) -> Recipe:
    """The recipe model of a ``run_recipe.sh``, of a MaxText benchmark-runner recipe (a
    script or README running ``benchmarks.benchmark_runner``), or of a README submitting a
    training script (``--command "bash <script> ..."``); ``variables`` are the ``--var`` values
    (``MAXTEXT_REVISION`` picks another MaxText revision than the recipe's)."""
    from tpu_trainer.recipes.benchmark_recipe import benchmark_recipe
    from tpu_trainer.recipes.cluster_toolkit import (
        looks_like_cluster_toolkit,
        parse_cluster_toolkit_recipe,
    )
    from tpu_trainer.recipes.reader import parse_recipe
    from tpu_trainer.recipes.script_readme import mentions_script_command
    from tpu_trainer.recipes.script_recipe import script_recipe

    text = read_recipe_file(ref)
    if ref.script.name != RECIPE_FILE and mentions_runner(text):
        return benchmark_recipe(ref.script, text, variables)
    if ref.script.suffix.lower() == ".md" and mentions_script_command(text):
        return script_recipe(ref.script, text, variables)
    if looks_like_cluster_toolkit(text):
        return parse_cluster_toolkit_recipe(text, str(ref.script))
    return parse_recipe(text, str(ref.script))
