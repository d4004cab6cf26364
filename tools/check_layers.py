"""The layer check: zkconsumer's imports flow one way, with no cycle and none hidden.

The layers, lowest first (a module may import its own package and any lower layer)::

    leaves     _errors _types _config_keys _properties _config _filters _tls _message
               _version _speedups
    zk/ broker/          ZooKeeper paths, reads, sessions, transactions | Kafka clients, backends
    consumer/            the connector, assignors, fetcher, streams, offsets, metrics
    ops/ spark/ bridge/  operator functions | the Spark source | the bridge for KRaft clusters
      (and the package's own __init__, the public facade)
    migration/           migrate status and copy, compare: built on the operator functions
    stack/               the development stack (ZooKeeper and Kafka run locally); production
                         code never imports it: only the CLI's ``stack`` command (cli.app)
    cli/                 argparse and rich over all of it; nothing imports it

Packages on one layer (``zk`` and ``broker``; ``ops``, ``spark`` and ``bridge``) do not import
each other. An import of a zkconsumer module inside a function is refused too: it is how a
cycle hides. Imports under ``if TYPE_CHECKING:`` count too, for the layers and for cycles:
a cycle seen only by the type checker is still two modules that cannot be read apart.
A name with a leading underscore is private to its sub-package (the leaves count as one):
another sub-package may not import it.

The tools (``tools/*.py``, run as ``python -m tools.NAME`` by their shell wrappers) are
checked too: no import cycle between them, no import from ``tests`` (what the tests and the
tools share lives in ``zkconsumer.stack`` or in ``tools/``), no ``sys.path`` edit (the package
is installed, and ``-m`` from the checkout finds ``tools``), and no import of a tools,
tests or zkconsumer module inside a function.

Run: ``python tools/check_layers.py [PACKAGE_DIR [TOOLS_DIR]]``; prints one line per
violation and exits 1, or exits 0 silently.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "zkconsumer"
#: The leaves, each importing only leaves before it here.
LEAVES = ("_version", "_speedups", "_types", "_errors", "_config_keys", "_properties",
          "_config", "_filters", "_tls", "_message")
#: Sub-package -> layer; the leaves are layer 0 and the package's __init__ (the facade) 3.
LAYERS = {"zk": 1, "broker": 1, "consumer": 2, "ops": 3, "spark": 3, "bridge": 3,
          "migration": 4, "stack": 5, "cli": 6}
FACADE_LAYER = 3
#: The development packages: no production module imports them, but these (the CLI's
#: ``zkconsumer stack`` command).
DEVELOPMENT = ("stack",)
DEVELOPMENT_USERS = ("zkconsumer.cli.app",)


@dataclass(frozen=True)
class Import:
    """One import of a zkconsumer module by another (``line`` in ``path``); ``private``:
    the names with a leading underscore it takes from that module."""

    importer: str
    imported: str
    path: Path
    line: int
    in_function: bool
    type_checking: bool
    private: tuple[str, ...] = ()


def module_name(root: Path, path: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group_of(module: str) -> str:
    """The unit a layer is given to: a leaf module, a sub-package, or the facade ("")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _package_of(module: str) -> str:
    """The sub-package a module belongs to ("" for the leaves and the facade)."""
    group = group_of(module)
    return group if group in LAYERS else ""


def layer_of(module: str) -> float | None:
    """The module's layer; a leaf's is a fraction below 1, in the order of LEAVES."""
    group = group_of(module)
    if group == "":
        return FACADE_LAYER
    if group in LAYERS:
        return LAYERS[group]
    if group == "__main__":
        return LAYERS["cli"] + 1  # python -m zkconsumer: above the CLI it runs
    return LEAVES.index(group) / len(LEAVES) if group in LEAVES else None


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The modules an ImportFrom names (``from zkconsumer.zk import paths`` names
    ``zkconsumer.zk.paths``); relative imports are resolved against ``module``."""
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    if target != PACKAGE and not target.startswith(PACKAGE + "."):
        return []
    return [target, *(f"{target}.{alias.name}" for alias in node.names)]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _function_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def imports(root: Path) -> Iterator[Import]:
    """Every import of a zkconsumer module in the package at ``root``."""
    known = {module_name(root, p) for p in root.rglob("*.py")}
    known |= {f"{root.name}.{leaf}" for leaf in LEAVES}
    for path in sorted(root.rglob("*.py")):
        module = module_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        checking, in_function = _type_checking_lines(tree), _function_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = _resolve(module, path.name == "__init__.py", node)
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
            else:
                continue
            # ``from P import m`` names the module P.m when there is one, else P.
            modules = {n for n in names if n in known}
            if len(names) > 1 and modules - {names[0]}:
                modules.discard(names[0])
            private = tuple(a.name for a in getattr(node, "names", ())
                            if isinstance(node, ast.ImportFrom) and a.name.startswith("_")
                            and not a.name.startswith("__") and names and names[0] in modules)
            for target in modules - {module}:
                yield Import(module, target, path, node.lineno, node.lineno in in_function,
                             node.lineno in checking, private if target == names[0] else ())


def layer_violations(found: list[Import]) -> Iterator[str]:
    for imp in found:
        where = f"{imp.path}:{imp.line}"
        mine, theirs = layer_of(imp.importer), layer_of(imp.imported)
        if group_of(imp.importer) == group_of(imp.imported) and group_of(imp.importer):
            pass  # within one sub-package
        elif mine is None or theirs is None:
            unknown = imp.importer if mine is None else imp.imported
            yield f"{where}: {unknown} is in no layer (add it to tools/check_layers.py)"
        elif theirs >= mine:
            why = "the same layer" if theirs == mine else "a higher layer"
            yield f"{where}: {imp.importer} imports {imp.imported}, on {why}"
        if group_of(imp.imported) in DEVELOPMENT and group_of(imp.importer) not in DEVELOPMENT \
                and imp.importer not in DEVELOPMENT_USERS:
            yield (f"{where}: {imp.importer} imports {imp.imported}, the development stack: "
                   "production code never does")
        if imp.in_function and not imp.imported.endswith("._speedups"):
            yield f"{where}: {imp.importer} imports {imp.imported} inside a function"
        if imp.private and _package_of(imp.importer) != _package_of(imp.imported) \
                and not imp.imported.endswith("._speedups"):
            yield (f"{where}: {imp.importer} imports {', '.join(imp.private)} from "
                   f"{imp.imported}: private to another package")


def cycles(found: list[Import]) -> list[list[str]]:
    """The import cycles among modules (strongly connected components of more than one
    module), imports made only for type checking included."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.importer, set()).add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graph is small
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def problems(root: Path) -> list[str]:
    """Every violation in the package at ``root``, one line each."""
    found = list(imports(root))
    lines = list(layer_violations(found))
    # A sub-package's __init__ that re-exports its modules makes a harmless cycle with them
    # when they import each other through it; none does today, so any cycle is reported.
    lines += [f"import cycle: {' -> '.join(c)}" for c in cycles(found)]
    return lines


TOOLS = "tools"
#: The top-level names a tool may not import inside a function (how a cycle hides).
_OWN_TOPS = (TOOLS, "tests", PACKAGE)


def _imported_names(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules (or module.name) an import statement of ``module`` names, absolute."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".")[: -node.level]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    return [target, *(f"{target}.{a.name}" for a in node.names)]


def _edits_sys_path(node: ast.AST) -> bool:
    """``sys.path.insert(...)`` (append, extend, remove), or ``sys.path`` assigned to."""
    def is_sys_path(n: ast.AST) -> bool:
        return (isinstance(n, ast.Attribute) and n.attr == "path"
                and isinstance(n.value, ast.Name) and n.value.id == "sys")

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return is_sys_path(node.func.value)
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(is_sys_path(x) or (isinstance(x, ast.Subscript) and is_sys_path(x.value))
                   for x in targets)
    return False


def tool_problems(tools: Path) -> list[str]:
    """Every violation in the tools at ``tools`` (its ``*.py``), one line each."""
    known = {f"{TOOLS}.{p.stem}" for p in tools.glob("*.py") if p.stem != "__init__"}
    lines: list[str] = []
    found: list[Import] = []
    for path in sorted(tools.glob("*.py")):
        module = f"{TOOLS}.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        checking, in_function = _type_checking_lines(tree), _function_lines(tree)
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if _edits_sys_path(node):
                lines.append(f"{where}: {module} edits sys.path (the package is installed; "
                             f"from the checkout, python -m {module} finds the tools)")
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported_names(module, node)
            top = names[0].split(".")[0]
            # What is named: a tool module, else the module imported from (``from tests
            # import support``: tests.support).
            shown = next((n for n in names[1:] if n in known), names[0])
            if shown == top and len(names) > 1:
                shown = names[1]
            if top == "tests":
                lines.append(f"{where}: {module} imports {shown}: tools never import the "
                             "tests (share it through zkconsumer.stack or tools/)")
            if top in _OWN_TOPS and node.lineno in in_function:
                lines.append(f"{where}: {module} imports {shown} inside a function")
            for target in {n for n in names if n in known} - {module}:
                found.append(Import(module, target, path, node.lineno,
                                    node.lineno in in_function, node.lineno in checking))
    lines += [f"import cycle: {' -> '.join(c)}" for c in cycles(found)]
    return lines


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    root = Path(argv[0]) if argv else here.parent / PACKAGE
    lines = problems(root) + tool_problems(Path(argv[1]) if len(argv) > 1 else here)
    for line in lines:
        print(line)
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
