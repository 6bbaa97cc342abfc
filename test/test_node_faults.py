"""No request ends a node (issue 29 items 1-4): the callback guard of every node, fuzzed services,
``~/run_modal_test`` checks before recording and its shutdown, files confined to the node's
output directory. Real node processes, real rclpy clients.

The fuzz campaign (:func:`fuzz`) sends ``FUZZ_REQUESTS`` hostile requests (test/fuzz_requests.py)
to each service one after the other and fails on the first node death or answer slower than
``HANG_S``; the nodes run with small work bounds (``max_map_configurations``, ``max_link_modes``,
``time_limit_s``, ``max_duration_s``) so that the valid requests among them stay quick.
"""
import math
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from flexmodal_interfaces.srv import (ApplyWrench, ComputeLinkModes, ComputeModalMap, ComputeModalParameters,
                                      ExpandModalParameters, IdentifyJointParameters, RunModalTest)
from fuzz_requests import RequestFuzzer

FUZZ_REQUESTS = 1000
HANG_S = 10.0
MAX_MESSAGE = 2000       # characters of a refusal: one line, user values cut (core.validation.shown)
THREE_LINK_JOINTS = ["joint_1", "joint_2", "joint_3"]
MODAL = "/fuzz/modal_analysis"


class Campaign:
    """Counts of one fuzzed service: answers (success / refused), slowest answer."""

    def __init__(self, name):
        self.name, self.ok, self.refused, self.slowest, self.elapsed = name, 0, 0, 0.0, 0.0
        self.internal = {}          # "internal error" answers (faults of the core the guard caught): kind → count

    def __str__(self):
        kinds = "".join(f"\n    {count} x {kind}" for kind, count in sorted(self.internal.items()))
        return (f"{self.name}: {self.ok + self.refused} requests, {self.ok} answered with success, "
                f"{self.refused} refused ({sum(self.internal.values())} internal errors), slowest "
                f"{self.slowest:.2f} s, total {self.elapsed:.1f} s{kinds}")


def fuzz(ros, process, client, fuzzer, count=FUZZ_REQUESTS, every_50=None):
    """Send ``count`` requests from ``fuzzer``; fail on a dead node or an answer later than HANG_S.
    ``every_50()``: called after every 50th request (e.g. a simulator reset)."""
    campaign = Campaign(client.srv_name)
    ros.spin_until(client.service_is_ready, 30.0, f"{client.srv_name} available")
    start = time.monotonic()
    for k in range(count):
        request = fuzzer()
        sent = time.monotonic()
        future = client.call_async(request)
        try:
            ros.spin_until(future.done, HANG_S, f"answer to request {k}")
        except TimeoutError:
            pytest.fail(f"{client.srv_name}: no answer within {HANG_S} s to request {k}: {request}\n{process.log()}")
        assert process.running(), f"{client.srv_name}: the node died on request {k}: {request}\n{process.log()}"
        response = future.result()
        campaign.slowest = max(campaign.slowest, time.monotonic() - sent)
        if every_50 is not None and k % 50 == 49:
            every_50()
        if response.success:
            campaign.ok += 1
        else:
            campaign.refused += 1
            assert response.message, f"refused without a reason: {request}"
            assert "\n" not in response.message and len(response.message) < MAX_MESSAGE, (
                f"refused with {len(response.message)} characters: {response.message[:300]!r}")
            if response.message.startswith("internal error"):
                kind = response.message.split(" at ")[-1].split(")")[0] + ": " + response.message[16:90]
                campaign.internal[kind] = campaign.internal.get(kind, 0) + 1
    campaign.elapsed = time.monotonic() - start
    print(campaign)
    return campaign


@pytest.fixture
def canary(tmp_path):
    """A directory the nodes must never write into (requests name it and paths escaping to it)."""
    path = Path("/tmp/flexmodal_fuzz_canary")
    path.mkdir(exist_ok=True)
    before = sorted(path.rglob("*"))
    yield path
    assert sorted(path.rglob("*")) == before, "a request wrote outside the node's output directory"


# --- item 1: the guard -------------------------------------------------------------------------

def test_link_modes_overflow_is_answered_and_the_node_keeps_serving(ros, ros_process, tmp_path):
    """Issue 29 item 1: {positions: [1e308, ...]} (RuntimeError in the root bracketing) and
    thickness_factor 1e200 (OverflowError) killed modal_analysis_server."""
    process = ros_process(["modal_analysis_server", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=three_link_arm",
                           "-p", f"output_dir:={tmp_path}"],
                          wait_for_service=(f"{MODAL}/compute_link_modes", ComputeLinkModes))
    client = ros.node("flexmodal_link_fault_client").create_client(ComputeLinkModes, f"{MODAL}/compute_link_modes")
    for fields in (dict(positions=[1e308, 1.5707963, -1.5707963], num_modes=10),
                   dict(positions=[0.0, 1.0, 1.0], thickness_factor=1e200)):
        response = ros.call(client, ComputeLinkModes.Request(**fields), timeout=HANG_S)
        assert not response.success and response.message, response
        assert process.running(), process.log()
    ok = ros.call(client, ComputeLinkModes.Request(positions=[0.0, 1.0, 1.0], num_modes=3), timeout=HANG_S)
    assert ok.success and ok.num_modes == 3, ok.message


def test_guard_answers_logs_once_and_keeps_serving(ros):
    """Every kind of callback of a GuardedNode (service, subscription, timer, parameter callback)
    fails; the node answers success=false with the reason, logs each kind of fault once per
    period, tells its listeners, and keeps serving."""
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from flexmodal_ros.nodes.guard import GuardedNode

    class Faulty(GuardedNode):
        def __init__(self):
            super().__init__("flexmodal_faulty", context=ros.context)
            self.calls = {"service": 0, "topic": 0, "timer": 0}
            self.create_service(Trigger, "~/fail", self.on_fail)
            self.create_subscription(String, "~/in", self.on_message, 10)
            self.create_timer(0.01, self.on_timer)
            self.declare_parameter("x", 1)
            self.add_on_set_parameters_callback(self.on_set)

        def on_fail(self, request, response):
            self.calls["service"] += 1
            raise RuntimeError("chandrupatla: a bracket does not change sign")

        def on_message(self, msg):
            self.calls["topic"] += 1
            raise OverflowError("(34, 'Numerical result out of range')")

        def on_timer(self):
            self.calls["timer"] += 1
            raise ZeroDivisionError("float division by zero")

        def on_set(self, params):
            raise KeyError("x")

    node = ros.add_node(Faulty())
    told = []
    node.fault_listeners.append(told.append)
    probe = ros.node("flexmodal_faulty_probe")
    client = probe.create_client(Trigger, "/flexmodal_faulty/fail")
    for _ in range(3):
        response = ros.call(client, Trigger.Request())
        assert not response.success
        assert response.message.startswith("internal error (RuntimeError: chandrupatla: a bracket does not change sign")
    pub = probe.create_publisher(String, "/flexmodal_faulty/in", 10)
    ros.spin_until(lambda: pub.get_subscription_count() > 0, 10.0, "subscribed")
    for _ in range(3):
        pub.publish(String(data="x"))
    ros.spin_until(lambda: node.calls["topic"] >= 3 and node.calls["timer"] >= 3, 10.0, "topic and timer faults")
    result = node.set_parameters([Parameter("x", value=2)])[0]
    assert not result.successful and "internal error (KeyError" in result.reason
    assert node.get_parameter("x").value == 1
    kinds = {text.split(":")[0] for text in told}
    assert {"~/fail", "~/in", "timer", "set parameters"} <= kinds, told
    assert len([t for t in told if t.startswith("timer")]) == 1          # logged once per period
    assert node.faults >= 3 + 3 + 3 + 1
    assert ros.call(client, Trigger.Request()).message.startswith("internal error")    # still serving


# --- item 1: the fuzz campaign -----------------------------------------------------------------

def _modal_requests(seed):
    """(service type, name, fuzzer) of the modal server's four services on three_link_arm."""
    q = [0.2, 0.5, -0.4]

    def parameters():
        return ComputeModalParameters.Request(positions=list(q))

    def modal_map():
        return ComputeModalMap.Request(num_configurations=2, positions=q + [0.1, 0.2, 0.3])

    def link_modes():
        return ComputeLinkModes.Request(positions=list(q), num_modes=3)

    def expand():
        return ExpandModalParameters.Request(positions=list(q), order=1, output_path="fuzz.npz")

    names = THREE_LINK_JOINTS + ["timoshenko", "euler-bernoulli", "eb-inextensible", "rigid", "elastic", "servo",
                                 "full", "below-cutoff", "zoh", "first-order", "fuzz.npz", "sub/dir/fuzz.npz"]
    return [(ComputeModalParameters, "compute_modal_parameters", RequestFuzzer(ComputeModalParameters, parameters, seed, names)),
            (ComputeModalMap, "compute_modal_map", RequestFuzzer(ComputeModalMap, modal_map, seed + 1, names)),
            (ComputeLinkModes, "compute_link_modes", RequestFuzzer(ComputeLinkModes, link_modes, seed + 2, names)),
            (ExpandModalParameters, "expand_modal_parameters", RequestFuzzer(ExpandModalParameters, expand, seed + 3,
                                                                             names))]


@pytest.mark.slow
def test_fuzz_modal_analysis_services(ros, ros_process, tmp_path, canary):
    """1,000 hostile requests to each of the modal server's services (three_link_arm: joints and
    links): every one answered within HANG_S, the node alive throughout, nothing written outside
    output_dir."""
    process = ros_process(["modal_analysis_server", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=three_link_arm",
                           "-p", "max_map_configurations:=8", "-p", "max_link_modes:=6", "-p", "link_time_limit_s:=2.0",
                           "-p", "max_expansion_terms:=20", "-p", f"output_dir:={tmp_path / 'out'}",
                           "-p", "overwrite_outputs:=true"],
                          wait_for_service=(f"{MODAL}/compute_link_modes", ComputeLinkModes))
    node = ros.node("flexmodal_fuzz_client")
    for srv_type, name, fuzzer in _modal_requests(seed=29):
        campaign = fuzz(ros, process, node.create_client(srv_type, f"{MODAL}/{name}"), fuzzer)
        assert campaign.ok > 0 and campaign.refused > 0       # the baseline mutations reach both outcomes
    assert process.running()


@pytest.mark.slow
def test_fuzz_identification_and_simulator_services(ros, ros_process, tmp_path):
    from test_identification import TABLE_3_1_Q, model_modes
    from flexmodal_ros.robot.registry import load_robot

    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q[:2], (0, 3))

    def identification():
        return IdentifyJointParameters.Request(
            num_configurations=len(data.q), positions=data.q.ravel().tolist(),
            modes_per_configuration=np.bincount(data.config).tolist(), frequencies_hz=data.frequency_hz.tolist(),
            damping_ratios=data.damping_ratio.tolist(), unknowns=["k"], starts=1)

    def impulse():
        return ApplyWrench.Request(wrench=[0.0, 10.0, 0.0, 0.0, 0.0, 0.0], duration=0.001)

    ident = ros_process(["identification_server", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=planar_2r",
                         "-p", "time_limit_s:=2.0", "-p", "workers:=1"],
                        wait_for_service=("/fuzz/joint_identification/identify_joint_parameters",
                                          IdentifyJointParameters))
    sim = ros_process(["flexible_joint_simulator", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=planar_2r",
                       "-p", "real_time_factor:=0.0", "-p", "max_wrench_duration_s:=0.01"],
                      wait_for_service=("/fuzz/flexible_joint_simulator/apply_wrench", ApplyWrench))
    node = ros.node("flexmodal_fuzz_client")
    names = ["joint_1", "joint_2", "k", "d_f", "d_fm", "determinant", "eigenvalue"]
    fuzz(ros, ident, node.create_client(IdentifyJointParameters, "/fuzz/joint_identification/identify_joint_parameters"),
         RequestFuzzer(IdentifyJointParameters, identification, 31, names))
    reset = node.create_client(Trigger, "/fuzz/flexible_joint_simulator/reset")     # after a fault (item 5)
    campaign = fuzz(ros, sim, node.create_client(ApplyWrench, "/fuzz/flexible_joint_simulator/apply_wrench"),
                    RequestFuzzer(ApplyWrench, impulse, 32), every_50=lambda: ros.call(reset, Trigger.Request()))
    assert campaign.ok > 0 and campaign.refused > 0


@pytest.mark.slow
def test_fuzz_run_modal_test(ros, ros_process, tmp_path, canary):
    """1,000 hostile RunModalTest requests (names, paths, durations, channels) with the simulator
    publishing: every one answered, the node alive, nothing outside its output_dir."""
    ros_process(["flexible_joint_simulator", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=planar_2r"],
                wait_for_service=("/fuzz/flexible_joint_simulator/apply_wrench", ApplyWrench))
    process = ros_process(["modal_test", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=planar_2r",
                           "-p", f"output_dir:={tmp_path / 'out'}", "-p", "max_duration_s:=0.05",
                           "-p", "wall_timeout_factor:=1.0", "-p", "wall_timeout_margin_s:=0.5"],
                          wait_for_service=("/fuzz/modal_test/run_modal_test", RunModalTest))

    def baseline():
        return RunModalTest.Request(duration=0.02, trigger_impulse=False, wrench=[0.0, 10.0, 0.0, 0.0, 0.0, 0.0],
                                    impulse_duration=0.002, pre_trigger=0.005, output_dir="runs")

    names = ["flexible_joint_simulator/apply_wrench", "/fuzz/flexible_joint_simulator/apply_wrench", "era",
             "ssi-cov", "var", "joint_1_motor", "joint_2_motor", "runs", "runs/a", str(canary)]
    client = ros.node("flexmodal_fuzz_client").create_client(RunModalTest, "/fuzz/modal_test/run_modal_test")
    campaign = fuzz(ros, process, client, RequestFuzzer(RunModalTest, baseline, 33, names))
    assert campaign.refused > 0
    assert all(tmp_path / "out" in p.parents or p == tmp_path / "out" for p in (tmp_path / "out").rglob("*"))


# --- items 2 and 3: ~/run_modal_test checks before recording, bounded, interruptible ------------

def _modal_test(ros_process, tmp_path, *params):
    return ros_process(["modal_test", "--ros-args", "-r", "__ns:=/mt", "-p", "robot:=planar_2r",
                        "-p", f"output_dir:={tmp_path / 'out'}", *[a for p in params for a in ("-p", p)]],
                       wait_for_service=("/mt/modal_test/run_modal_test", RunModalTest))


def test_run_modal_test_refuses_bad_fields_before_recording(ros, ros_process, tmp_path, canary):
    """Issue 29 item 2: with nobody publishing joint states a request that started recording would
    wait its wall timeout (3 x 10 s + 5 s); every bad field is answered at once, naming it, and
    the node keeps serving. Item 3: a duration above max_duration_s likewise."""
    process = _modal_test(ros_process, tmp_path, "max_duration_s:=20.0")
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / "a_file").write_text("not a directory")
    client = ros.node("flexmodal_mt_client").create_client(RunModalTest, "/mt/modal_test/run_modal_test")

    def request(**fields):
        base = dict(duration=10.0, trigger_impulse=True, wrench=[0.0, 10.0, 0.0, 0.0, 0.0, 0.0],
                    impulse_duration=0.002, pre_trigger=0.5)
        return RunModalTest.Request(**{**base, **fields})

    cases = [(dict(impulse_service="bad name!"), "impulse_service: 'bad name!' is not a valid ROS service name"),
             (dict(impulse_service="trailing "), "impulse_service: 'trailing ' is not a valid"),
             (dict(impulse_service="schlüssel/apply_wrench"), "is not a valid ROS service name"),
             (dict(impulse_service="/nobody/apply_wrench"), "impulse_service: /nobody/apply_wrench is not available"),
             (dict(trigger_impulse=False, output_dir="/dev/null/x"), "output_dir: '/dev/null/x' resolves to"),
             (dict(trigger_impulse=False, output_dir=str(canary)), "outside the node's output directory"),
             (dict(trigger_impulse=False, output_dir="../escape"), "outside the node's output directory"),
             (dict(trigger_impulse=False, output_dir="a_file"), "output_dir: cannot create a folder"),
             (dict(trigger_impulse=False, output_dir="x" * 256), "output_dir: the path or one of its names is too long"),
             (dict(duration=1e6), "duration: 1e+06 s is longer than this node's max_duration_s (20 s)"),
             (dict(duration=math.nan), "duration")]
    for fields, expected in cases:
        started = time.monotonic()
        response = ros.call(client, request(**fields), timeout=HANG_S)
        assert not response.success and expected in response.message, (fields, response.message)
        assert time.monotonic() - started < 8.0, fields          # the impulse service wait is 5 s
        assert process.running(), process.log()
    assert not (tmp_path / "escape").exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["a_file"]     # no folder left by a refused test


def test_ctrl_c_during_a_recording_ends_the_node_within_2_s(ros, ros_process, tmp_path):
    """Issue 29 item 3: Ctrl-C 6 s into a 30 s test (measured before: 33 s, SIGINT and SIGTERM
    ignored while recording)."""
    ros_process(["flexible_joint_simulator", "--ros-args", "-r", "__ns:=/mt", "-p", "robot:=planar_2r"],
                wait_for_service=("/mt/flexible_joint_simulator/apply_wrench", ApplyWrench))
    process = _modal_test(ros_process, tmp_path)
    client = ros.node("flexmodal_mt_client").create_client(RunModalTest, "/mt/modal_test/run_modal_test")
    future = client.call_async(RunModalTest.Request(duration=30.0, trigger_impulse=False))
    end = time.monotonic() + 6.0
    ros.spin_until(lambda: time.monotonic() > end, 10.0, "6 s of recording")
    assert not future.done() and process.running()
    sent = time.monotonic()
    process.popen.send_signal(signal.SIGINT)
    code = process.popen.wait(10.0)
    elapsed = time.monotonic() - sent
    print(f"modal_test ended {elapsed:.2f} s after SIGINT, 6 s into a 30 s recording")
    assert code == 0 and elapsed < 2.0, (code, elapsed, process.log())
    assert "Traceback" not in process.log()


# --- item 4: files a service writes stay in the node's output directory --------------------------

def test_expansion_files_stay_in_the_output_directory(ros, ros_process, tmp_path, canary):
    """Issue 29 item 4: absolute paths, ../ and symbolic links out of output_dir are refused, an
    existing file is not replaced (overwrite_outputs false), a path inside is written."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(canary)
    (out / "old.npz").write_bytes(b"keep me")
    process = ros_process(["modal_analysis_server", "--ros-args", "-r", "__ns:=/files", "-p", "robot:=planar_2r",
                           "-p", f"output_dir:={out}"],
                          wait_for_service=("/files/modal_analysis/expand_modal_parameters", ExpandModalParameters))
    client = ros.node("flexmodal_files_client").create_client(ExpandModalParameters,
                                                              "/files/modal_analysis/expand_modal_parameters")

    def expand(path):
        return ros.call(client, ExpandModalParameters.Request(positions=[0.3, 0.5], order=1, output_path=path),
                        timeout=HANG_S)

    for path, expected in ((str(canary / "x.npz"), "outside the node's output directory"),
                           ("../escape.npz", "outside the node's output directory"),
                           ("link/x.npz", "outside the node's output directory"),
                           ("old.npz", "already exists (the node's parameter overwrite_outputs is false"),
                           ("", None)):
        response = expand(path)
        if expected is None:
            assert response.success, response.message          # no file asked for
            continue
        assert not response.success and expected in response.message, (path, response.message)
    assert (out / "old.npz").read_bytes() == b"keep me" and not (tmp_path / "escape.npz").exists()
    response = expand("sub/dir/coefficients.npz")
    assert response.success, response.message
    assert (out / "sub" / "dir" / "coefficients.npz").stat().st_size > 1000
    assert not expand("sub/dir/coefficients.npz").success                # written once, never replaced
    assert process.running()


class _GoalAsRequest:
    """The fuzzer builds ``Request`` messages: an action's goal stands in for one."""

    def __init__(self, action_type):
        self.Request = action_type.Goal


@pytest.mark.slow
def test_fuzz_calibration_goals(ros, ros_process, tmp_path, canary):
    """200 hostile ~/calibrate goals to a calibration node without a robot behind it: every goal
    ends within HANG_S — refused with the field named, or, if valid, aborted because no joint
    state arrives (margin_s) — never with an internal error, with a one-line message of bounded
    length; the node alive throughout, nothing written outside output_dir."""
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from flexmodal_interfaces.action import Calibrate

    process = ros_process(["calibration_server", "--ros-args", "-r", "__ns:=/fuzz", "-p", "robot:=planar_2r",
                           "-p", "max_budget:=3", "-p", "max_candidates:=40", "-p", "margin_s:=0.2",
                           "-p", f"output_dir:={tmp_path / 'out'}"])
    node = ros.node("flexmodal_fuzz_client")
    client = ActionClient(node, Calibrate, "/fuzz/calibration/calibrate")
    ros.spin_until(lambda: client.wait_for_server(timeout_sec=0.1), 60.0, "calibration action server")

    def valid():
        return Calibrate.Goal(budget=1, validation=0, pulses_per_configuration=1, candidates=8, seed=1)

    fuzzer = RequestFuzzer(_GoalAsRequest(Calibrate), valid, seed=33,
                           names=["k", "d_f", "d_fm", "joint_1", "joint_2", "run_1"])
    outcomes, slowest = {}, 0.0
    for k in range(200):
        goal = fuzzer()
        sent = time.monotonic()
        result = ros.send_goal(client, goal).get_result_async()
        try:
            ros.spin_until(result.done, HANG_S, f"result of goal {k}")
        except TimeoutError:
            pytest.fail(f"no result within {HANG_S} s for goal {k}: {goal}\n{process.log()}")
        slowest = max(slowest, time.monotonic() - sent)
        assert process.running(), f"the node died on goal {k}: {goal}\n{process.log()}"
        answer = result.result()
        message = answer.result.message
        assert answer.status == GoalStatus.STATUS_ABORTED and not answer.result.success, (goal, message)
        assert message and "\n" not in message and len(message) < MAX_MESSAGE, (goal, message)
        assert not message.startswith(("internal error", "calibration failed")), (goal, message)
        kind = "no joint state" if "none arrived" in message else message.split(":")[0]
        outcomes[kind] = outcomes.get(kind, 0) + 1
    print(f"calibration goals: {outcomes}, slowest {slowest:.2f} s")
    assert outcomes.get("no joint state", 0) > 0 and len(outcomes) > 3     # valid goals and refusals of several fields
