"""Read a recipe script's text, with the errors a user can act on."""

from __future__ import annotations

from tpu_trainer.errors import InputError
from tpu_trainer.recipes.resolve import RecipeRef


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
