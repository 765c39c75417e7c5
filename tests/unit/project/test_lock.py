"""requirements/lock.txt and pyproject.toml agree, and the running venv holds the locked versions.

`make setup` (so `make run`, `make test` and CI) installs exactly the lock; these tests fail when someone edits
pyproject's dependencies without `make lock`, or when the suite runs on other versions than the locked ones.
"""

import importlib.metadata
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "requirements" / "lock.txt"
LOCK_INPUTS = ROOT / "requirements" / "lock.in"
PYPROJECT = ROOT / "pyproject.toml"


@dataclass(frozen=True)
class Pin:
    name: NormalizedName
    version: str
    marker: Marker | None
    hashes: int

    def applies(self) -> bool:
        """Whether this pin is the one for the running interpreter and platform."""
        return self.marker is None or self.marker.evaluate()


def read_lock(text: str) -> list[Pin]:
    """The pins of a lock file: each starts in column 0, its hashes and comments follow indented."""
    pins = []
    for entry in re.split(r"\n(?=\S)", text):
        head = entry.split("\n", 1)[0].rstrip(" \\")
        if not head or head.startswith("#"):
            continue
        req = Requirement(head)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{head!r}: a lock pins with == only"
        hashes = len(re.findall(r"--hash=sha256:[0-9a-f]{64}\b", entry))
        pins.append(Pin(canonicalize_name(req.name), specs[0].version, req.marker, hashes))
    return pins


def declared(pyproject_text: str) -> dict[str, list[Requirement]]:
    """pyproject's requirements by where they are declared: runtime, each extra, the build system."""
    data = tomllib.loads(pyproject_text)
    groups = {"dependencies": data["project"]["dependencies"]}
    for extra, reqs in data["project"].get("optional-dependencies", {}).items():
        groups[f"extra {extra}"] = reqs
    groups["build-system"] = data["build-system"]["requires"]
    return {group: [Requirement(r) for r in reqs] for group, reqs in groups.items()}


def drift(requirements: dict[str, list[Requirement]], pins: list[Pin]) -> list[str]:
    """Each requirement the lock does not pin, or pins (in any environment) at a version it does not allow."""
    problems = []
    for group, reqs in requirements.items():
        for req in reqs:
            mine = [p for p in pins if p.name == canonicalize_name(req.name)]
            if not mine:
                problems.append(f"{group}: {req} is not in the lock")
            problems += [
                f"{group}: {req} but the lock pins {p.version}"
                for p in mine
                if not req.specifier.contains(p.version, prereleases=True)
            ]
    return problems


def lock_inputs() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in LOCK_INPUTS.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def test_every_declared_dependency_is_pinned_at_a_version_pyproject_allows() -> None:
    requirements = declared(PYPROJECT.read_text()) | {"requirements/lock.in": lock_inputs()}
    assert drift(requirements, read_lock(LOCK.read_text())) == [], "pyproject changed without `make lock`"


def test_every_pin_is_exact_and_hashed() -> None:
    pins = read_lock(LOCK.read_text())
    assert len(pins) > 50
    assert [p.name for p in pins if p.hashes == 0] == [], "make setup installs with --require-hashes"
    assert [p.name for p in pins if "torch" in p.name or p.name.startswith("nvidia")] == []


def test_one_pin_per_package_applies_here() -> None:
    applying = [p.name for p in read_lock(LOCK.read_text()) if p.applies()]
    assert sorted(n for n in set(applying) if applying.count(n) > 1) == []


@pytest.mark.parametrize("group", ["dependencies", "extra dev"])
def test_the_venv_running_the_tests_holds_the_locked_versions(group: str) -> None:
    pins = {p.name: p.version for p in read_lock(LOCK.read_text()) if p.applies()}
    installed = {}
    for req in declared(PYPROJECT.read_text())[group]:
        name = canonicalize_name(req.name)
        try:
            installed[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed[name] = "not installed"
    assert installed == {name: pins.get(name) for name in installed}, "run `make setup`"


def test_drift_names_a_missing_package_and_a_disallowed_version() -> None:
    lock = read_lock(
        "# header\nwatchdog==7.1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via ragd (pyproject.toml)\n"
        "soupsieve==2.10 ; python_full_version < '3.11.5' \\\n    --hash=sha256:" + "1" * 64 + "\n"
        "soupsieve==4.1.3 ; python_full_version >= '3.11.5' \\\n    --hash=sha256:" + "2" * 64 + "\n"
    )
    assert [(p.name, p.version, p.hashes) for p in lock] == [
        ("watchdog", "7.1.0", 1),
        ("soupsieve", "2.10", 1),
        ("soupsieve", "4.1.3", 1),
    ]
    pyproject = """
        [build-system]
        requires = ["setuptools>=77"]
        [project]
        dependencies = ["Watchdog>=6,<8", "soupsieve>=3"]
        [project.optional-dependencies]
        dev = ["pytest>=8"]
    """
    assert drift(declared(pyproject), lock) == [
        "dependencies: soupsieve>=3 but the lock pins 2.10",
        "extra dev: pytest>=8 is not in the lock",
        "build-system: setuptools>=77 is not in the lock",
    ]
