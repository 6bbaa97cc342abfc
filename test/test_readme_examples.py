"""The README's shell examples, run as a user would type them (issue 28: on both distributions).

Every command of README.md's ``bash`` blocks is one test case (id = the command), classified by
:func:`classify`:

* ``flexmodal ...`` runs in a scratch directory that links the repository's ``config/``, ``urdf/``,
  ``docs/`` and ``launch/`` (so relative paths resolve as from the checkout) with ``/tmp/`` paths
  moved into it; it must exit 0 without a traceback. The selected CLI examples run concurrently,
  one per core (fixture ``cli_runs``), and each test checks its own.
* a node's console script (``modal_analysis_server --ros-args ...``, ``flexmodal_bringup``) is
  started; it must serve its main service, then end with exit code 0 on SIGINT (Ctrl-C).
* ``make demo`` / ``make demo-mujoco``: their recipe (what make runs once the set-up is done) runs
  in the checkout with the running session's environment; it must exit 0.
* skipped, the reason in the report: the ``ros2`` CLI, ``launch`` and colcon (not on the package
  index: docs/ros_install.md), ``dask scheduler/worker`` and ``tcp://`` (other machines),
  placeholders (``...``, ``[--option]``, the user's own files), ``make test``/``setup`` (this
  suite itself), ``. scripts/env.sh`` (test_interfaces.py sources it), and the long runs of
  :data:`LONG`, each covered at a small size by the test it names.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ros_stops import stalled_in_rclpy_teardown

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
pytestmark = pytest.mark.readme

# Repository directories a command may name with a relative path.
LINKED_DIRECTORIES = ("config", "urdf", "docs", "launch")
# Options whose value is an input file (a missing one means "your own file": skipped).
INPUT_OPTIONS = {"--urdf", "--params", "--bag", "--csv", "--data", "--trajectory"}
# Non-file values of those options.
INPUT_KEYWORDS = {"thesis"}
# Console scripts of the nodes: (service that says the node serves, its type as module, name).
NODE_SERVICES = {
    "modal_analysis_server": ("/modal_analysis/compute_modal_parameters", "flexmodal_interfaces.srv", "ComputeModalParameters"),
    "identification_server": ("/joint_identification/identify_joint_parameters", "flexmodal_interfaces.srv",
                              "IdentifyJointParameters"),
    "modal_test": ("/modal_test/run_modal_test", "flexmodal_interfaces.srv", "RunModalTest"),
    "flexible_joint_simulator": ("/flexible_joint_simulator/reset", "std_srvs.srv", "Trigger"),
    "feedforward_pd_controller": ("/feedforward_pd_controller/statistics", "std_srvs.srv", "Trigger"),
    "flexmodal_bringup": ("/modal_analysis/compute_modal_parameters", "flexmodal_interfaces.srv", "ComputeModalParameters"),
}
MAKE_TARGETS = {"demo", "demo-mujoco"}
# Examples that run for minutes (regex on the command -> the test that runs the same path at a small size).
LONG = {
    r"--grid joint_2=-1\.5:1\.5:100 .*--store": "10^6 configurations: test_distributed.py (Zarr store, resume)",
    r"--grid joint_2=-1:1:200 .*--store": "50,000 tracked configurations: test_distributed.py (tracked store)",
    r"--starts 200 --scheduler": "200 identification starts on Dask: test_distributed.py (identification)",
    r"^flexmodal expand --paper": "the paper's task and plots: test_expand_cli.py::test_paper_task_cli",
    r"^flexmodal oma --robot kuka_lwr4 .*--impulse-axis x0,y0,z0": "three impacts on the LWR4: "
                                                                   "test_oma.py::test_kuka_lwr4_impact_tests_nonlinear",
}
TIMEOUT_S = 600


def _logical_lines(block):
    """Lines of a shell block with backslash continuations joined and comments removed."""
    out, pending = [], ""
    for raw in block.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(" ".join(line.split()))
    return out


def readme_commands(text=None):
    """Every command of the README's ``bash`` blocks, in order, without duplicates."""
    text = README.read_text() if text is None else text
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)
    return list(dict.fromkeys(line for block in blocks for line in _logical_lines(block)))


def classify(command):
    """("skip", reason) or (kind, argv) with kind in cli, node, make."""
    argv = shlex.split(command)
    head = argv[0]
    if head == "dask" or "dask" in argv or any(a.startswith("tcp://") for a in argv):
        return "skip", "needs other machines (Dask scheduler/workers)"
    if head in ("ros2", "colcon") or argv[:2] == ["source", "install/setup.bash"]:
        return "skip", f"{head} is not on the package index (see docs/ros_install.md for how it was checked)"
    if head in (".", "source"):
        return "skip", "environment script: test_interfaces.py sources scripts/env.sh"
    if any(a == "..." or a.startswith("[") or "..." in a for a in argv):
        return "skip", "placeholder for your own values"
    for pattern, reason in LONG.items():
        if re.search(pattern, command):
            return "skip", f"runs for minutes; covered by {reason}"
    if head == "make":
        targets = [a for a in argv[1:] if "=" not in a]
        if set(targets) <= MAKE_TARGETS and targets:
            return "make", argv
        return "skip", "make test/setup: this suite itself and its set-up"
    if head == "flexmodal":
        for option, value in zip(argv, argv[1:]):
            if option in INPUT_OPTIONS and value not in INPUT_KEYWORDS and not (ROOT / value).exists():
                return "skip", f"needs your own file ({option} {value})"
        return "cli", argv
    if head in NODE_SERVICES:
        return "node", argv
    raise AssertionError(f"README command of an unknown kind (teach test_readme_examples.classify): {command}")


COMMANDS = readme_commands()


def test_readme_has_runnable_examples():
    kinds = [classify(c)[0] for c in COMMANDS]
    assert kinds.count("cli") >= 10 and kinds.count("node") >= 3 and kinds.count("make") >= 1, kinds


def test_every_long_example_pattern_matches_a_readme_command():
    """Keeps LONG honest: a pattern whose command left the README is removed here too."""
    for pattern in LONG:
        assert any(re.search(pattern, c) for c in COMMANDS), f"LONG pattern {pattern!r} matches no README command"


def make_recipe(target):
    """The commands of a Makefile target that depends on `setup` only (the set-up is done before the
    tests; running make itself here could reinstall the virtualenv under the running suite)."""
    match = re.search(rf"^{re.escape(target)}: setup\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)
    assert match, f"Makefile target {target}: expected `{target}: setup` and a recipe"
    return "\n".join(line[1:] for line in match.group(1).splitlines())


def _scratch(tmp_path):
    for name in LINKED_DIRECTORIES:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def _check(run):
    output = run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == 0, f"exit code {run.returncode}:\n{output}"
    assert "Traceback" not in run.stderr, output


def _run(argv, cwd, env):
    return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def cli_runs(request, tmp_path_factory, ros_env):
    """{command: CompletedProcess} of the selected CLI examples, run concurrently (one per core),
    each in its own scratch directory."""
    selected = {item.callspec.params["command"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_readme_example" and hasattr(item, "callspec")}
    jobs = [(c, classify(c)[1]) for c in COMMANDS if c in selected and classify(c)[0] == "cli"]
    flexmodal = str(Path(sys.executable).parent / "flexmodal")

    def run(job):
        command, argv = job
        scratch = _scratch(tmp_path_factory.mktemp("readme"))
        argv = [flexmodal, *(a.replace("/tmp/", f"{scratch}/") for a in argv[1:])]
        return command, _run(argv, scratch, ros_env)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(pool.map(run, jobs))


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_example(command, request, ros_env, ros_process):
    kind, argv = classify(command)
    if kind == "skip":
        pytest.skip(argv)
    if kind == "cli":
        _check(request.getfixturevalue("cli_runs")[command])
    elif kind == "make":
        for target in argv[1:]:
            _check(_run(["bash", "-c", make_recipe(target)], ROOT, ros_env))
    else:
        service, module, type_name = NODE_SERVICES[argv[0]]
        srv_type = getattr(__import__(module, fromlist=[type_name]), type_name)
        process = ros_process(argv, wait_for_service=(service, srv_type), timeout=120.0)
        code = process.stop(timeout=30.0)
        if code == 1 and stalled_in_rclpy_teardown(process.log_path.read_text(errors="replace")):
            return          # the middleware stalled the clean-up: cut at the stop bound (ros_stops.py)
        assert code == 0, process.log()
        assert "Traceback" not in process.log_path.read_text(errors="replace"), process.log()


def test_readme_lists_every_console_script():
    """Issue 29 item 14: the executables README names are the ones setup.py installs."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    scripts = sorted(node.value.split("=")[0].strip() for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and re.match(r"^\w+ = flexmodal_ros[\w.]*:\w+$", node.value))
    assert "flexmodal" in scripts and len(scripts) >= 9, scripts
    text = README.read_text()
    section = text[text.index("## ROS 2 interfaces"):]
    section = section[:section.index("\n## ", 1)]
    listed = sorted(set(re.findall(r"^\| `(\w+)`", section, flags=re.M)))
    assert listed == sorted(s for s in scripts if s != "flexmodal"), (listed, scripts)
    assert "`flexmodal`" in text
