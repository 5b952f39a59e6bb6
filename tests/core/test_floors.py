"""The floors netcast is built in, every module on one, each importing only from its own floor
and those below, and no modules that import each other in a circle. Every import counts, one
inside a function too.

- the ground: the shared base (errors, files, formats, settings, the trace), the models, and
  the data, corpus, retrievers and indexes, with the Signatures;
- the middle: evaluation (it imports no program), the programs, the loading of programs and
  artifacts (``session``, ``artifacts``, ``inputs``), the optimizers;
- the top: rendering, the benchmarks as specs, the command line.

And no function over 80 lines, no module over 600, in the package's own folders."""

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
# lowest first; a module's floor is that of the longest prefix naming it
FLOORS = [
    ("ground: base", ["netcast", "netcast.errors", "netcast.env", "netcast.settings"]),
    ("ground: base", ["netcast.interrupts", "netcast.files", "netcast.formats"]),
    ("ground: base", ["netcast.trace", "netcast.pareto", "netcast.testing"]),
    ("ground: models", ["netcast.models"]),
    ("ground: data", ["netcast.corpus", "netcast.stored", "netcast.retrievers"]),
    ("ground: data", ["netcast.indexing", "netcast.data", "netcast.signatures"]),
    ("middle: evaluation", ["netcast.evaluation"]),
    ("middle: programs", ["netcast.programs"]),
    ("middle: loading", ["netcast.inputs", "netcast.artifacts", "netcast.session"]),
    ("middle: optimize", ["netcast.optimize"]),
    ("top: render", ["netcast.render"]),
    ("top: specs", ["netcast.specs"]),
    ("top: cli", ["netcast.cli", "netcast.__main__"]),
]
NAMES = list(dict.fromkeys(name for name, _ in FLOORS))


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
    """The rank of ``name``'s floor (``NAMES``), by the longest prefix that names it."""
    best, rank = "", None
    for label, prefixes in FLOORS:
        for prefix in prefixes:
            named = name == prefix or name.startswith(prefix + ".")
            if named and len(prefix) > len(best):
                best, rank = prefix, NAMES.index(label)
    return rank


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a module to one on a floor above it."""
    found = []
    for name, used in sorted(edges.items()):
        found += [f"{name} -> {u}" for u in sorted(used) if floor(u) > floor(name)]
    return found


def test_every_module_is_on_a_floor():
    assert [name for name in modules() if floor(name) is None] == []


def test_no_module_imports_from_a_floor_above_its_own():
    assert upward(graph()) == []


def test_an_upward_import_planted_in_a_module_is_found(tmp_path):
    """The models (ground) importing the optimizers (middle) inside a function, as a module
    would: the check names it."""
    known = modules()
    source = known["netcast.models.factory"].read_text(encoding="utf-8")
    planted = tmp_path / "factory.py"
    planted.write_text(
        source + "\n\ndef _planted():\n    from netcast.optimize.workflow import make_recipe\n",
        encoding="utf-8",
    )
    edges = graph()
    edges["netcast.models.factory"] = imports("netcast.models.factory", planted, known)
    assert upward(edges) == ["netcast.models.factory -> netcast.optimize.workflow"]
    # and an evaluation module importing a program
    edges = graph()
    edges["netcast.evaluation.metrics"].add("netcast.programs.registry")
    assert upward(edges) == ["netcast.evaluation.metrics -> netcast.programs.registry"]


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


MAX_FUNCTION, MAX_MODULE = 80, 600  # lines, in the package's own folders


def too_long(path: Path) -> list[str]:
    """``path``'s functions over ``MAX_FUNCTION`` lines, and the module if over ``MAX_MODULE``."""
    source = path.read_text(encoding="utf-8")
    found = [f"{path.name}: {source.count(chr(10))} lines"] * (source.count("\n") > MAX_MODULE)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION:
                found.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_function_over_80_lines_and_no_module_over_600():
    paths = [
        p for folder in ("netcast", "optimize", "programs") for p in (ROOT / folder).rglob("*.py")
    ]
    assert [line for path in sorted(paths) for line in too_long(path)] == []


def test_a_long_function_or_module_is_named(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    planted = tmp_path / "long.py"
    planted.write_text("def long():\n" + body + "\n" * MAX_MODULE, encoding="utf-8")
    assert too_long(planted) == [
        f"long.py: {MAX_MODULE + MAX_FUNCTION + 1} lines",
        f"long.py:1 long: {MAX_FUNCTION + 1} lines",
    ]
