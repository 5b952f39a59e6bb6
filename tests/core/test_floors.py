"""The floors netcast is built in, each module importing only from its own floor and those
below: the evaluation primitives (``netcast/evaluation``: evaluate, metrics, stats, runlog),
the optimizers (``optimize/``), the rendering module (``netcast/render.py``), the benchmarks as
specs (``netcast/specs``: spec, bench, report, reference, the papers' tables) and the command
line (``netcast/cli``); and no modules that import each other in a circle. Every import
counts, one inside a function too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# pyproject's package-dir: each folder's import name
FOLDERS = {
    "netcast": "netcast",
    "optimize": "netcast.optimize",
    "programs": "netcast.programs",
    "signatures": "netcast.signatures",
    "data": "netcast.data",
}
FLOORS = [
    "netcast.evaluation",
    "netcast.optimize",
    "netcast.render",
    "netcast.specs",
    "netcast.cli",
]


def modules() -> dict[str, Path]:
    found = {}
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [*path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([name, *parts])] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The netcast modules ``name`` imports anywhere in its file (a package's ``__init__``
    counted where a name is imported from it, its submodule where the name is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def floor(name: str) -> int | None:
    for i, prefix in enumerate(FLOORS):
        if name == prefix or name.startswith(prefix + "."):
            return i
    return None


def test_no_module_imports_from_a_floor_above_its_own():
    upward = []
    for name, used in graph().items():
        mine = floor(name)
        if mine is None:
            continue
        upward += [f"{name} -> {u}" for u in sorted(used) if (floor(u) or -1) > mine]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert circles == []
