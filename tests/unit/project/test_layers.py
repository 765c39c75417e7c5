"""mcp/ and web/ are sibling tables over verbs/: neither imports the other (the HTTP edge, edges/http.py, mounts
both on one port), and verbs/ imports neither of them nor edges/. Every import counts, those under TYPE_CHECKING
and inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RAGD = Path(__file__).resolve().parents[3] / "agent" / "ragd"


def packages_imported(package: str) -> dict[str, set[str]]:
    """For each package of ragd that a module of `package` imports: those modules."""
    found: dict[str, set[str]] = {}
    for path in (RAGD / package).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == 0 and module.startswith("ragd."):
                    targets = [module.split(".")[1]]
                elif node.level == 2 and module:
                    targets = [module.split(".")[0]]
                elif node.level == 2:
                    targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("ragd.")]
            for target in targets:
                found.setdefault(target, set()).add(path.name)
    return found


@pytest.mark.parametrize(("package", "never"), [("mcp", "web"), ("web", "mcp"), ("verbs", "mcp"),
                                                 ("verbs", "web"), ("verbs", "edges"), ("mcp", "edges"),
                                                 ("web", "edges")])  # fmt: skip
def test_no_import_between(package: str, never: str) -> None:
    assert packages_imported(package).get(never, set()) == set()


CORE = (
    "model.py",
    "errors.py",
    "metakeys.py",
    "atomic.py",
    "heap.py",
    "paths.py",
    "modes.py",
    "vocabulary.py",
)  # the values every layer shares


@pytest.mark.parametrize("module", CORE)
def test_the_core_modules_import_no_package(module: str) -> None:
    """The shared values sit below every package: a core module importing one (even for a type) is an import up."""
    packages = {p.name for p in RAGD.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    imported = set()
    for node in ast.walk(ast.parse((RAGD / module).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            imported.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ragd."):
            imported.add((node.module or "").split(".")[1])
    assert imported & packages == set()


RAGCTL = RAGD.parents[1] / "cli" / "ragctl"


def ragctl_modules_imported(files: list[Path]) -> dict[str, set[str]]:
    """For each module of ragctl that these files import (absolutely, `ragctl.X...`): the files."""
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("ragctl")
            ):
                module = node.module or ""
                names = [f"{module}.{a.name}" for a in node.names] if module == "ragctl" else [module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("ragctl")]
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(RAGD.parent)))
    return found


def test_the_agent_takes_from_ragctl_only_its_protocol() -> None:
    """What both sides of the socket and both command lines agree on is `ragctl.protocol`; the rest of ragctl (its
    rendering, commands, MCP bridge) is the client's own, and the agent borrowed from it (`pid_alive`, the console's
    search output, the web page's explanations)."""
    imported = ragctl_modules_imported(list(RAGD.rglob("*.py")))
    borrowed = {m: f for m, f in imported.items() if not (m + ".").startswith("ragctl.protocol.")}
    assert imported and borrowed == {}


def test_the_protocol_package_imports_nothing_else_of_ragctl() -> None:
    relative = set()
    for path in (RAGCTL / "protocol").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                relative.add(f"{path.name}: {'.' * node.level}{node.module or ''}")
    assert relative == set()
