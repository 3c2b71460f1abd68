"""fuzzfuse's layers (pyproject.toml's [tool.importlinter]: IR, generation, backends, judgement, the
reducer, cases, reduction, corpus, campaign, CLI) hold, and no module of fuzzfuse imports itself
back through others, at the top or inside a function."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "fuzzfuse"


def test_the_import_contracts_hold():
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[test]')")
    done = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST):
    """Every import statement, at any depth, except those under `if TYPE_CHECKING:` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes = node.orelse
        else:
            nodes = [node]
        for n in nodes:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                yield n
            yield from _imports(n)


def import_graph() -> nx.DiGraph:
    """fuzzfuse's modules, an edge from each to every module of fuzzfuse it imports."""
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
                # `from package import module` imports the module; `from module import name`, the module.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph.add_edge(module, target)
    return graph


def test_no_module_of_fuzzfuse_imports_itself_back():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    graph = import_graph()
    # The imports the contracts ignore, each with its reason there (import-linter fails once one is gone).
    for contract in config["contracts"]:
        for ignored in contract.get("ignore_imports", ()):
            importer, imported = (m.strip() for m in ignored.split("->"))
            if graph.has_edge(importer, imported):
                graph.remove_edge(importer, imported)
    assert graph.number_of_edges() > 100  # the graph was read
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, cycles
