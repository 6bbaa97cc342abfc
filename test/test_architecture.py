"""The layout of the package, checked from the code (docs/ARCHITECTURE.md): dependencies point down
only, no import cycle between subpackages, no import inside a function except a deferred heavy
dependency, unique module names, and the modal toolkit as the only home of pole -> mode logic."""
import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "flexmodal_ros"

# Layers, bottom first: a module may import its own subpackage and any subpackage of a lower layer.
LAYERS = [
    ("core",),
    ("modes",),
    ("linalg", "robot"),
    ("flexible_joint",),
    ("control", "identification", "links", "constrained", "expansion"),
    ("simulation",),
    ("oma", "export", "distributed"),
    ("shaping",),
    ("calibration",),
    ("cli",),
    ("nodes",),
]
LAYER = {name: level for level, names in enumerate(LAYERS) for name in names}
DEFERRED = re.compile(r"#\s*deferred:\s*\S")


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts), parts[-1] == "__init__"


def _resolve(module, is_package, node):
    """Absolute name of what ``node`` (ast.ImportFrom / ast.Import) imports from ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        return [node.module]
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return [".".join(base + ([node.module] if node.module else []))]


def _comments_above(lines, lineno):
    """The comment and import lines right above line ``lineno`` (1-based) of a block of imports."""
    out, k = [], lineno - 2
    while k >= 0 and (lines[k].strip().startswith(("#", "from ", "import ")) or "# deferred:" in lines[k]):
        out.append(lines[k])
        k -= 1
    return out


def _imports():
    """(module, target, line, inside a function, deferred comment) for every flexmodal_ros import."""
    out = []
    for path, module, is_package in _modules():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        inner = {id(n) for f in functions for n in ast.walk(f) if n is not f}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                around = " ".join(lines[node.lineno - 1:node.end_lineno] + _comments_above(lines, node.lineno))
                for target in _resolve(module, is_package, node):
                    out.append((module, target, node.lineno, id(node) in inner, bool(DEFERRED.search(around))))
    return out


def _subpackage(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "flexmodal_ros" else None


def test_dependencies_point_down_only():
    upward = []
    for module, target, line, _, _ in _imports():
        a, b = _subpackage(module), _subpackage(target)
        if a and b and a != b and a in LAYER and b in LAYER and LAYER[b] >= LAYER[a]:
            upward.append(f"{module}:{line} imports {target}")
    unknown = sorted({_subpackage(m) for m, *_ in _imports() if _subpackage(m) and _subpackage(m) not in LAYER
                      and (PACKAGE / _subpackage(m)).is_dir()})
    assert not unknown, f"subpackages missing from the layer list (docs/ARCHITECTURE.md): {unknown}"
    assert not upward, "imports that point up or sideways:\n" + "\n".join(upward)


def test_no_import_cycle_between_modules():
    graph = defaultdict(set)
    modules = {m for _, m, _ in _modules()}
    for module, target, _, in_function, _ in _imports():
        if target in modules and target != module and not in_function:
            graph[module].add(target)
    seen, stack, cycles = set(), [], []

    def visit(node, on_path):
        seen.add(node)
        on_path.add(node)
        stack.append(node)
        for nxt in graph[node]:
            if nxt in on_path:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in seen:
                visit(nxt, on_path)
        on_path.discard(node)
        stack.pop()

    for module in sorted(modules):
        if module not in seen:
            visit(module, set())
    # a package importing its own submodules in __init__ is not a cycle of the design
    real = [c for c in cycles if not all(m.startswith(c[0]) or c[0].startswith(m) for m in c)]
    assert not real, "import cycles:\n" + "\n".join(" -> ".join(c) for c in real)


def test_imports_inside_functions_only_defer_heavy_dependencies():
    bare = [f"{module}:{line} imports {target}" for module, target, line, in_function, deferred in _imports()
            if in_function and not deferred]
    assert not bare, ("imports inside functions without a '# deferred: <what>' comment naming the heavy "
                      "dependency they defer:\n" + "\n".join(bare))


def test_module_names_are_unique():
    names = defaultdict(list)
    for path, module, is_package in _modules():
        if not is_package and path.name != "__main__.py":
            names[path.stem].append(module)
    repeated = {stem: mods for stem, mods in names.items() if len(mods) > 1}
    assert not repeated, f"module names used more than once: {repeated}"


POLE_TO_MODE = [
    (re.compile(r"linear_sum_assignment"), "assignment (modes.tracking)"),
    (re.compile(r"/\s*\(?2\s*\*\s*(np|math)\.pi\)?|/\s*TWO_PI"), "f = |λ|/2π (modes.frequencies_and_damping)"),
    (re.compile(r"\.imag\s*(>|>=|==|<=)\s*0(\.0)?\b"), "the real/oscillatory rule (modes.is_real / is_oscillatory)"),
    (re.compile(r"def\s+(mac|track_modes|frequencies_and_damping|classify_stability)\b"), "a modal-toolkit twin"),
]


def test_pole_to_mode_logic_lives_in_the_modal_toolkit():
    found = []
    for path, module, _ in _modules():
        if module.startswith("flexmodal_ros.modes"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in POLE_TO_MODE:
                if pattern.search(code) and "allow-pole-logic" not in line:
                    found.append(f"{module}:{number}: {what}: {line.strip()}")
    assert not found, "pole -> mode logic outside flexmodal_ros/modes:\n" + "\n".join(found)


MAX_FILE_LINES, MAX_CLASS_LINES = 500, 200


def test_files_and_classes_stay_small_or_say_why():
    too_long = []
    for path, module, _ in _modules():
        text = path.read_text()
        reason = "Size:" in (ast.get_docstring(ast.parse(text)) or "")
        if len(text.splitlines()) > MAX_FILE_LINES and not reason:
            too_long.append(f"{module}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                too_long.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, (f"files over {MAX_FILE_LINES} lines without a 'Size:' reason in their docstring, "
                          f"classes over {MAX_CLASS_LINES} lines:\n" + "\n".join(too_long))


def test_the_public_api_is_listed_in_one_place_and_resolves():
    import flexmodal_ros

    missing = [name for name in flexmodal_ros.__all__ if getattr(flexmodal_ros, name, None) is None]
    assert not missing and len(flexmodal_ros.__all__) > 30
    undocumented = [name for name in flexmodal_ros.__all__ if name not in flexmodal_ros.__doc__]
    assert not undocumented, f"public names missing from the package docstring: {undocumented}"


def test_the_modal_server_starts_without_what_its_first_request_does_not_need():
    """Importing the modal server's module (what its console script does before it serves) loads
    neither CasADi, the Gazebo/MuJoCo export writers nor the shaping core: those are imported by
    the requests that use them (issue 28: start-up and resident memory of the server)."""
    import subprocess
    import sys

    unwanted = ["casadi", "flexmodal_ros.export.tree", "flexmodal_ros.export.gazebo", "flexmodal_ros.control.law",
                "flexmodal_ros.shaping"]
    code = ("import sys, flexmodal_ros.nodes.modal_analysis_server; "
            f"print(' '.join(m for m in {unwanted!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"imported at start-up: {out.stdout.strip()}"


@pytest.mark.parametrize("package", ["control", "export"])
def test_lazy_package_exports_resolve(package):
    import importlib

    module = importlib.import_module(f"flexmodal_ros.{package}")
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not missing and len(module.__all__) > 5
