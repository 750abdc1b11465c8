"""A small evaluator for MaxText's benchmark configuration modules, read with ``ast``.

MaxText's ``benchmarks/maxtext_*_model_configs.py`` and ``benchmarks/xla_flags_library.py`` are
plain assignments of strings, dicts and ``MaxTextModel(...)`` calls. They are never imported or
executed here: each module-level statement is walked and the few forms they use are evaluated
(string constants and f-strings, ``+``, dict and tuple displays, ``**`` in dicts, names of earlier
assignments, ``xla_flags_library.NAME``, ``os.path.join``, ``gettempdir()``, the constructor
helpers ``CUSTOM_VMEM_LIMIT_FLAG(...)`` and ``_add_to_model_dictionary(dict, model)``, and
``if`` on a constant). Anything else raises :class:`UnsupportedSourceError` naming the line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TEMP_DIR = "/tmp"  # noqa: S108 - a value the configurations read, no file is made
"""What ``tempfile.gettempdir()`` returns in the workload's container (Linux, no TMPDIR)."""


class UnsupportedSourceError(ValueError):
    """A construct the evaluator does not handle."""


@dataclass
class Model:
    """One ``MaxTextModel(...)``: the fields the benchmark runner uses."""

    model_name: str
    model_type: str
    tuning_params: dict[str, Any]
    xla_flags: str


@dataclass
class Namespace:
    """The module-level names of one evaluated module."""

    values: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, Namespace] = field(default_factory=dict)
    """Other evaluated modules by the name this one refers to them with."""
    registries: dict[str, dict[str, Model]] = field(default_factory=dict)
    """``*_model_dict`` names and what ``_add_to_model_dictionary`` put in them."""


def _join(*parts: Any) -> str:
    out = ""
    for part in parts:
        text = str(part)
        out = text if text.startswith("/") or not out else out.rstrip("/") + "/" + text
    return out


class Evaluator:
    def __init__(self, namespace: Namespace, source: str) -> None:
        self.ns = namespace
        self.source = source

    def fail(self, node: ast.AST, what: str) -> UnsupportedSourceError:
        line = getattr(node, "lineno", 0)
        return UnsupportedSourceError(f"{self.source}:{line}: {what}: {ast.unparse(node)[:120]}")

    def run(self, tree: ast.Module) -> None:
        self.block(tree.body)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                if not isinstance(target, ast.Name):
                    raise self.fail(stmt, "assignment to something other than a name")
                self.ns.values[target.id] = value
                if isinstance(value, dict) and not value and target.id.endswith("_model_dict"):
                    self.ns.registries[target.id] = {}
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            if isinstance(stmt.target, ast.Name):
                self.ns.values[stmt.target.id] = self.eval(stmt.value)
        elif isinstance(stmt, ast.If):
            self.block(stmt.body if self.eval(stmt.test) else stmt.orelse)
        elif isinstance(stmt, ast.Expr | ast.Import | ast.ImportFrom | ast.ClassDef):
            return  # docstrings and imports; the class is known as ``Model``
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "_add_to_model_dictionary":
            return  # the helper is evaluated by name
        else:
            raise self.fail(stmt, "unsupported statement")

    def eval(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(self.eval(v) for v in node.values)
        if isinstance(node, ast.FormattedValue):
            value = self.eval(node.value)
            value = repr(value) if node.conversion == ord("r") else value
            spec = self.eval(node.format_spec) if node.format_spec else ""
            return format(value, spec)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.eval(node.left) + self.eval(node.right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return {**self.eval(node.left), **self.eval(node.right)}
        if isinstance(node, ast.Tuple | ast.List):
            return [self.eval(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    out.update(self.eval(value))
                else:
                    out[self.eval(key)] = self.eval(value)
            return out
        return self.eval_ref(node)

    def eval_ref(self, node: ast.expr) -> Any:
        """Names, attributes, unary operators, lambdas and calls."""
        if isinstance(node, ast.Name):
            if node.id in self.ns.values:
                return self.ns.values[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            raise self.fail(node, "unknown name")
        if isinstance(node, ast.Attribute) and node.attr == "format":
            return self.eval(node.value).format
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = self.ns.modules.get(node.value.id)
            if module is not None and node.attr in module.values:
                return module.values[node.attr]
            raise self.fail(node, "unknown attribute")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.eval(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.eval(node.operand)
        if isinstance(node, ast.Lambda):
            return self.lambda_(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, "unsupported expression")

    def lambda_(self, node: ast.Lambda) -> Callable[..., Any]:
        names = [a.arg for a in node.args.args]

        def call(*args: Any) -> Any:
            inner = Namespace(dict(self.ns.values), self.ns.modules)
            inner.values.update(zip(names, args, strict=True))
            return Evaluator(inner, self.source).eval(node.body)

        return call

    def call(self, node: ast.Call) -> Any:
        func = ast.unparse(node.func)
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords if k.arg is not None}
        if func == "MaxTextModel":
            names = ("model_name", "model_type", "tuning_params", "xla_flags")
            fields = dict(zip(names, args, strict=False))
            fields.update(kwargs)
            return Model(
                model_name=fields["model_name"],
                model_type=fields["model_type"],
                tuning_params=dict(fields["tuning_params"]),
                xla_flags=fields.get("xla_flags", ""),
            )
        if func == "_add_to_model_dictionary":
            registry_node = node.args[0]
            if (
                not isinstance(registry_node, ast.Name)
                or registry_node.id not in self.ns.registries
            ):
                raise self.fail(node, "model added to an unknown dictionary")
            model = args[1]
            self.ns.registries[registry_node.id][model.model_name.replace("-", "_")] = model
            return model
        if func == "os.path.join":
            return _join(*args)
        if func in ("gettempdir", "tempfile.gettempdir"):
            return TEMP_DIR
        target = self.eval(node.func)
        if callable(target):
            return target(*args, **kwargs)
        raise self.fail(node, "unsupported call")


def evaluate(
    text: str, source: str, modules: dict[str, Namespace], preset: dict[str, Any]
) -> Namespace:
    """Evaluate one module's text; ``modules`` are the evaluated modules it refers to by name."""
    namespace = Namespace(dict(preset), modules)
    Evaluator(namespace, source).run(ast.parse(text, source))
    return namespace


def models_of(namespace: Namespace, registry: str) -> dict[str, Model]:
    """The models a runner finds by name: the registry's when the module has one, else (older
    revisions, looked up with ``getattr``) every module-level ``MaxTextModel``."""
    if registry in namespace.registries:
        return dict(namespace.registries[registry])
    return {k: v for k, v in namespace.values.items() if isinstance(v, Model)}
