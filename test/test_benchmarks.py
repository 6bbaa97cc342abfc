"""Issue 29 item 17: benchmark scripts must not rot. Every ``benchmarks/*.py`` script (modules
starting with ``_`` are shared helpers, not scripts) runs with ``--quick`` (tiny sizes, one
repeat) and exits 0; the figures are not checked (performance lives in the scripts, never in
tests). Scripts needing ROS get the test's private ROS environment. No script imports another
script: shared helpers live in benchmarks/_shared.py."""
import ast
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_scripts_import_no_other_script():
    names = {p.stem for p in SCRIPTS}
    for script in SCRIPTS:
        tree = ast.parse(script.read_text())
        imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert not imported & names, f"{script.name} imports {imported & names}: move shared helpers to _shared.py"
        assert "--quick" in script.read_text() or "add_quick_option" in script.read_text(), script.name


@pytest.mark.slow
def test_every_benchmark_runs_quick(tmp_path, ros_env):
    assert len(SCRIPTS) >= 14

    def run(script):
        began = time.monotonic()
        proc = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path, env=ros_env)
        return script.name, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - began

    with ThreadPoolExecutor(2) as pool:              # two at a time: the 2-core machine
        results = list(pool.map(run, SCRIPTS))
    failed = [f"{name}: exit {code} after {seconds:.0f} s\n{err[-2000:]}" for name, code, _, err, seconds in results
              if code != 0]
    assert not failed, "\n\n".join(failed)
    for name, _, out, _, _ in results:
        assert "load average" in out, f"{name} does not print the machine load with its figures"
