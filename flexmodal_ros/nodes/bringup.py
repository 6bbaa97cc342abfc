"""``flexmodal_bringup``: start the suite's nodes for one robot without ROS 2's launch tools.

Starts, as separate processes from their console scripts, the same set of nodes as
``launch/bringup.launch.py``: flexible_joint_simulator, feedforward_pd_controller,
modal_analysis_server, identification_server, each with ``robot:=<name>`` (the bundled
``config/<name>.yaml`` + ``urdf/<name>.urdf``). Usage::

    flexmodal_bringup [--robot kuka_lwr4] [--namespace arm1] [--real-time-clock] [--param node.name:=value ...]
                      [--with calibration]

Simulation time: the simulator is the plant here, so the controller and the modal analysis server
run on its /clock (``use_sim_time``): a simulation that falls behind on a busy machine slows their
time down with it instead of tripping the controller's 0.05 s stale-state limit.
``--real-time-clock`` (and ``make demo``, which measures real-time behaviour) keeps their steady
clock, as on a real robot. ``--namespace NS`` pushes every node into ``/NS`` (topics are relative:
``/NS/joint_states``, ``/NS/effort_controller/commands``) and the robot's clock to ``/NS/clock``,
so that two robots run side by side on one domain.

Ctrl-C stops every node (each ends within ~1 s, exit code 0). The environment must keep ROS
traffic on loopback (``. scripts/env.sh`` sets ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST; it is
forced here too).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..core.errors import ConfigError, FlexmodalError
from ..core.fastdds import profile_variable
from ..robot.registry import robot_paths, share_dir
from ..core.validation import shown

DEFAULT_ROBOT = "kuka_lwr4"
# The variable the installed Fast DDS reads its profile from: FASTRTPS_DEFAULT_PROFILES_FILE on 2.x
# (Jazzy), FASTDDS_DEFAULT_PROFILES_FILE on 3.x (Kilted) (core/fastdds.py); the launch files use it too.
DISCOVERY_PROFILE_VARIABLE = profile_variable()
# (executable = console script, node name); the launch file uses the same table.
NODES = (
    ("flexible_joint_simulator", "flexible_joint_simulator"),
    ("feedforward_pd_controller", "feedforward_pd_controller"),
    ("modal_analysis_server", "modal_analysis"),
    ("identification_server", "joint_identification"),
)

# Nodes started on request (launch argument ``<key>:=true``, ``flexmodal_bringup --with <key>``).
OPTIONAL_NODES = {"calibration": ("calibration_server", "calibration")}
OPTIONAL_ARGUMENTS = {"calibration": "true: also start the calibration node (action ~/calibrate, "
                                     "flexmodal_ros/nodes/calibration_server.py)"}


def optional_nodes(flags):
    """(executable, node name) of the optional nodes whose flag (a dict key → launch value) is true."""
    return tuple(OPTIONAL_NODES[key] for key, value in flags.items()
                 if key in OPTIONAL_NODES and str(value).strip().lower() in ("true", "1", "yes"))


# Launch arguments naming the robot model (launch/*.launch.py); an empty value means "not given".
ROBOT_ARGUMENTS = {
    "robot": "bundled robot: scompi, planar_2r, kuka_lwr4 (not given: the launch file's default "
             "robot, unless params_path is given)",
    "urdf_path": "URDF of your robot (not given: the one named in params_path)",
    "params_path": "flexibility parameter YAML of your robot (used when robot is not given)",
}


def launch_robot_parameters(robot="", urdf_path="", params_path="", default_robot=DEFAULT_ROBOT):
    """Node parameters for the launch arguments ``robot``/``urdf_path``/``params_path``.

    An empty value means "not given", and so does a value that is only a pair of quotes (``''`` or
    ``""``, as typed through a shell: ``ros2 launch`` refuses ``robot:=``). Returns ``{"robot":
    robot}``; or, when only files are given, ``{"params_path": ..., "urdf_path": ...}`` (absolute
    paths, ``urdf_path`` only if given); or, when nothing is given, ``{"robot": default_robot}``.
    ConfigError for a robot name together with files, or a URDF without a params YAML.
    """
    robot, urdf_path, params_path = (_given(v) for v in (robot, urdf_path, params_path))
    if robot and (urdf_path or params_path):
        raise ConfigError("robot: give either a bundled robot name or urdf_path/params_path, not both "
                          f"(got robot:={robot} with the file(s) {urdf_path or params_path})")
    if urdf_path and not params_path:
        raise ConfigError("params_path: a flexibility parameter YAML is required with urdf_path")
    if params_path:
        files = {"params_path": params_path, "urdf_path": urdf_path}
        return {name: str(Path(path).expanduser().resolve()) for name, path in files.items() if path}
    return {"robot": robot or default_robot}


def _given(value):
    """A launch argument's value with surrounding whitespace removed; '' for "not given"."""
    value = str(value).strip()
    return "" if value in ("''", '""') else value


# Exported robots on MuJoCo (``engine="mujoco"``): the mujoco_simulator in place of the built-in
# simulator; the nodes reading /joint_states use the exported convention and simulation time.
MUJOCO_NODES = (("mujoco_simulator", "mujoco_simulator"),) + NODES[1:]
EXPORTED_ROBOT_PARAMS = {"feedforward_pd_controller": {"link_state": "deflection", "use_sim_time": True},
                 "modal_analysis": {"link_state": "deflection", "use_sim_time": True}}
ENGINES = {"builtin": NODES, "mujoco": MUJOCO_NODES}
# The built-in simulator as the plant: the nodes that time their work run on its /clock.
SIMULATED_PLANT_PARAMS = {"feedforward_pd_controller": {"use_sim_time": True}, "modal_analysis": {"use_sim_time": True}}


def namespace_arguments(namespace):
    """``--ros-args`` remappings that put a node into ``namespace`` ("" or None: none): ``__ns``
    and the clock topic ``/clock`` → ``/<namespace>/clock`` (one clock per simulated robot)."""
    ns = check_namespace(namespace)
    return ["-r", f"__ns:={ns}", "-r", f"/clock:={ns}/clock"] if ns else []


def check_namespace(namespace):
    """``namespace`` as an absolute ROS namespace ("" for none); FlexmodalError if invalid."""
    text = _given(namespace or "").strip("/")
    if not text:
        return ""
    from rclpy.validate_namespace import validate_namespace   # deferred: rclpy, only for a namespace

    try:
        validate_namespace("/" + text)
    except Exception as exc:            # noqa: BLE001 - rclpy raises several types for a bad name
        reason = str(exc).strip().splitlines()[0].split(", at /")[0]
        raise FlexmodalError(f"namespace: {shown(text)} is not a valid ROS namespace ({reason})") from None
    return "/" + text


def nodes_for(engine):
    """(executable, node name) table of ``engine`` ("builtin" or "mujoco")."""
    if engine not in ENGINES:
        raise FlexmodalError(f"engine: expected one of {', '.join(ENGINES)}, got {shown(engine)}")
    return ENGINES[engine]


def executable_path(name):
    """Console script ``name``: next to this interpreter first (virtualenv), then PATH."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        raise FlexmodalError(f"executable '{name}' not found (run `make setup`)")
    return found


def node_commands(robot, params=None, engine="builtin", namespace=None, sim_time=True, extra=()):
    """argv per node: ``--ros-args -p robot:=<robot>`` plus ``params`` {node name: {param: value}},
    the :func:`namespace_arguments` of ``namespace`` and, with the built-in simulator and
    ``sim_time``, ``use_sim_time`` for the controller and the modal server (module docstring);
    ``extra``: optional nodes (keys of OPTIONAL_NODES) after the engine's."""
    robot_paths(robot)  # ConfigError naming the bundled robots if unknown
    params = params or {}
    table = nodes_for(engine) + optional_nodes({key: True for key in extra})
    unknown = set(params) - {name for _, name in table}
    if unknown:
        raise FlexmodalError(f"params: unknown node(s) {', '.join(sorted(unknown))}")
    commands = []
    for executable, name in table:
        argv = [executable_path(executable), "--ros-args", *namespace_arguments(namespace), "-p", f"robot:={robot}"]
        engine_params = (EXPORTED_ROBOT_PARAMS.get(name, {}) if engine == "mujoco" else
                         SIMULATED_PLANT_PARAMS.get(name, {}) if sim_time else {})
        for key, value in {**engine_params, **params.get(name, {})}.items():
            argv += ["-p", f"{key}:={_ros_value(value)}"]
        commands.append(argv)
    return commands


def discovery_profile():
    """Path of config/fastdds_discovery.xml (faster DDS participant discovery; the file says why)."""
    return share_dir() / "config" / "fastdds_discovery.xml"


def ros_environment(env=None):
    """``env`` (default os.environ) with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, a domain id and,
    unless set, the discovery profile config/fastdds_discovery.xml."""
    env = dict(os.environ if env is None else env)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault(DISCOVERY_PROFILE_VARIABLE, str(discovery_profile()))
    env.setdefault("ROS_DOMAIN_ID", "42")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start(robot, params=None, log_dir=None, env=None, engine="builtin", namespace=None, sim_time=True, extra=()):
    """Start the nodes (:func:`node_commands`, with the optional ``extra`` ones); returns the Popen
    objects (output to ``log_dir/<node>.log`` if given)."""
    processes = []
    table = nodes_for(engine) + optional_nodes({key: True for key in extra})
    for (_, name), argv in zip(table, node_commands(robot, params, engine, namespace, sim_time, extra)):
        out = open(Path(log_dir) / f"{name}.log", "wb") if log_dir else None
        processes.append(subprocess.Popen(argv, env=ros_environment(env), stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=subprocess.STDOUT if out else None))
        processes[-1].node_name = name
    return processes


def check_running(processes, engine="builtin"):
    """FlexmodalError naming the first node that exited."""
    for (_, name), p in zip(nodes_for(engine), processes):
        if p.poll() is not None:
            raise FlexmodalError(f"node {name} exited with code {p.returncode} (see its log)")


def stop(processes, timeout=10.0):
    """SIGINT every process, SIGKILL those still running after ``timeout`` s."""
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout
    for p in processes:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _ros_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return "[" + ",".join(repr(float(v)) for v in list(value)) + "]"
    return str(value)


def _parse_params(items):
    params = {}
    for item in items:
        head, sep, value = item.partition(":=")
        node, dot, key = head.partition(".")
        if not sep or not dot:
            raise FlexmodalError(f"--param: expected node.name:=value, got {shown(item)}")
        params.setdefault(node, {})[key] = value
    return params


def main(argv=None):
    parser = argparse.ArgumentParser(prog="flexmodal_bringup", description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default=DEFAULT_ROBOT, help=f"bundled robot (default {DEFAULT_ROBOT})")
    parser.add_argument("--namespace", default="", help="push every node (and the robot's /clock) into /NAMESPACE")
    parser.add_argument("--real-time-clock", action="store_true",
                        help="controller and modal server on the steady clock instead of the simulation's /clock")
    parser.add_argument("--param", action="append", default=[], help="node.name:=value (repeatable)")
    parser.add_argument("--with", dest="extra", action="append", default=[], choices=sorted(OPTIONAL_NODES),
                        help="also start an optional node (calibration)")
    args = parser.parse_args(argv)
    processes = []
    try:
        try:
            processes = start(args.robot, _parse_params(args.param), namespace=args.namespace,
                              sim_time=not args.real_time_clock, extra=args.extra)
        except FlexmodalError as exc:
            print(f"flexmodal_bringup: error: {exc}", file=sys.stderr)
            return 2
        while all(p.poll() is None for p in processes):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # one Ctrl-C: the clean-up is not interrupted
        stop(processes)
    failed = [p for p in processes if p.returncode not in (0, -signal.SIGINT)]
    for p in failed:        # which node, and how: its own log lines are above
        print(f"flexmodal_bringup: node {p.node_name} ended with code {p.returncode}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
