"""Private names stay inside their package.

Every module under src/rtlab is parsed with `ast`; a `from M import _x` where `_x` is
a private name (one underscore first, not a dunder) is refused when M belongs to another
package than the importing module. A private *module* of another package may be imported
from when the names taken from it are public (`from rtlab.system._cpus import
parse_cpulist`); `from rtlab.system import _facts` takes a private name and is refused.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE_ROOT = SRC / "rtlab"


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(module: str, src: Path) -> bool:
    return (src.joinpath(*module.split(".")) / "__init__.py").is_file()


def package_of(module: str, src: Path) -> str:
    """The package a module belongs to: itself for a package, its parent otherwise."""
    return module if is_package(module, src) else module.rpartition(".")[0]


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def absolute(node: ast.ImportFrom, importer: str, src: Path) -> str:
    """The module an ImportFrom names, relative imports resolved against IMPORTER."""
    if not node.level:
        return node.module or ""
    base = package_of(importer, src).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def is_module(module: str, src: Path) -> bool:
    path = src.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or is_package(module, src)


def ours(module: str) -> bool:
    return module == "rtlab" or module.startswith("rtlab.")


def private_imports(path: Path, src: Path = SRC) -> list[str]:
    """`file:line: name from module` for each private name PATH takes from another package.

    Taken means named in a `from … import`, or read as an attribute of a module of
    another package bound by an import (`import rtlab.system._facts as f; f._parse`).
    """
    importer = module_name(path, src)
    home = package_of(importer, src)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(src.parent)
    found: list[tuple[int, str, str]] = []
    modules: dict[str, str] = {}  # local name -> the rtlab module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    local = alias.asname or alias.name.partition(".")[0]
                    modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node, importer, src)
            if not ours(source):
                continue
            foreign = package_of(source, src) != home
            for alias in node.names:
                if foreign and is_private(alias.name):
                    found.append((node.lineno, alias.name, source))
                if is_module(f"{source}.{alias.name}", src):
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"

    def resolve(node: ast.expr) -> str | None:
        """The rtlab module NODE names through the imports, if it names one."""
        if isinstance(node, ast.Name):
            return modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = resolve(node.value)
            if base is not None and is_module(f"{base}.{node.attr}", src):
                return f"{base}.{node.attr}"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            # a private module on the way to a public name is a path, as in
            # `from rtlab.system._cpus import parse_cpulist`: only the name counts
            source = resolve(node.value)
            if (
                source is not None
                and package_of(source, src) != home
                and not is_module(f"{source}.{node.attr}", src)
            ):
                found.append((node.lineno, node.attr, source))
    return [f"{where}:{line}: {name} from {source}" for line, name, source in sorted(found)]


def test_no_private_name_imported_from_another_package() -> None:
    modules = sorted(PACKAGE_ROOT.rglob("*.py"))
    assert len(modules) > 50, f"only {len(modules)} modules found under {PACKAGE_ROOT}"
    found = [hit for path in modules for hit in private_imports(path)]
    assert not found, "private names imported across packages:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("importer", "source", "expected"),
    [
        # the forbidden case: a private function of another package
        ("tune/_knobs_cpu.py", "from rtlab.system._facts import X, _parse", ["_parse"]),
        # a private module of another package, taken as a name
        ("tune/_x.py", "from rtlab.system import _facts", ["_facts"]),
        # a relative import reaching into another package
        ("tune/_x.py", "from ..system._facts import _parse", ["_parse"]),
        # in a function body too
        (
            "cli/x.py",
            "def f():\n    from rtlab.cli._common import ok\n    from rtlab.tune import _crash\n",
            ["_crash"],
        ),
        # a subpackage is another package than its parent
        ("cli/x.py", "from rtlab import _input", ["_input"]),
        # public names of a private module of another package
        ("tune/_x.py", "from rtlab.system._cpus import parse_cpulist", []),
        # private names within one package
        ("tune/_plan.py", "from rtlab.tune import _knobs\nfrom rtlab.tune._x import _y", []),
        ("tune/__init__.py", "from rtlab.tune._apply import _z\nfrom . import _w", []),
        ("x.py", "from rtlab._input import _limit", []),
        # read as an attribute of a module of another package
        ("cli/x.py", "import rtlab.tune._x as t\nt._y()\nt.z()\n", ["_y"]),
        ("cli/x.py", "from rtlab.tune import _x\n_x._y", ["_x", "_y"]),
        ("cli/x.py", "import rtlab.tune\nrtlab.tune._y()\n", ["_y"]),
        ("cli/x.py", "from rtlab import tune\ntune._crash.z()\n", []),
        ("tune/_x.py", "from rtlab.tune import _knobs as k\nk._y", []),
        # dunders, other libraries
        ("cli/x.py", "from rtlab import __version__\nfrom os import _exit", []),
    ],
)
def test_rule_on_examples(tmp_path: Path, importer: str, source: str, expected: list[str]) -> None:
    root = tmp_path / "src"
    for package in ("rtlab", "rtlab/tune", "rtlab/system", "rtlab/cli"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    for module in ("_input", "tune/_x", "tune/_crash", "tune/_knobs", "system/_facts"):
        (root / "rtlab" / f"{module}.py").write_text("")
    path = root / "rtlab" / importer
    path.write_text(source)
    found = private_imports(path, root)
    assert [hit.rsplit(": ", 1)[1].split(" from ")[0] for hit in found] == expected
    for hit in found:
        assert hit.startswith(f"src/rtlab/{importer}:"), hit
