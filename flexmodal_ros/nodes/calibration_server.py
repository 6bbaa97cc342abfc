"""ROS 2 node ``calibration``: calibrate the joint stiffness and damping of the robot behind the
suite's topics, as an action (flexmodal_ros/calibration/, docs/calibration.md).

Action ``~/calibrate`` (flexmodal_interfaces/Calibrate): designed configurations → move (through
``feedforward_pd_controller``: C⁴ trajectories within the URDF limits) → settle → motor pulses
(the controller's ``~/excite``, bounded by ``max_excitation_torque``) → record ``/joint_states`` →
OMA → weighted identification → … until the targets or the budget; then validation
configurations. Feedback at every stage (per configuration: position, modes measured, values and
standard deviations). Cancel: the calibration stops at its next check (within the current move,
settle or record, all bounded), the robot is left holding (the controller's hold law; the
experiment's gains are restored) and the data measured so far stays on disk. A fault (the
robot stops publishing, the controller refuses a trajectory, an excitation or the gains) ends
the goal the same way, aborted with the reason. One calibration at a time: a goal while another
runs is aborted ("busy").

Files: everything a goal writes lies under ``output_dir``/<output_name> (a goal names only
the sub-directory; path separators and '..' are refused): ``calibrated.yaml`` (loadable params,
only on success), ``calibrated.calibration.json``, ``report.md`` + PNGs, ``partial/`` (every
configuration's records as soon as measured).

Parameters: ``robot`` or ``urdf_path`` + ``params_path``; ``controller`` (/feedforward_pd_controller);
``link_state`` (absolute | deflection); ``controller_rate_hz`` (1000, joint-state and control rate);
``hold`` (zoh-delay: the loop model, one period of command delay as on ROS); ``channels`` (both);
``output_dir`` (the directory every goal writes under; empty = <ROS log dir>/flexmodal/<node>); defaults of a goal's zero fields ``budget`` (8),
``validation`` (2), ``pulses_per_configuration`` (2), ``candidates`` (120), ``design`` (optimal; or
worst-first, docs/calibration.md); bounds checked before a
goal starts: ``max_budget`` (30), ``max_candidates`` (500), ``max_excitation_torque`` (declared as 10 % of
the URDF effort limits, one or per joint [N m]), ``max_duration_s`` (3600: the robot time a goal may
take, estimated from the budget before it starts, and enforced as a deadline of 3× it in wall
time), ``wall_factor`` (3) and ``margin_s`` (10): the wall-time bound of every wait on the robot.
"""
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.task import Future

from flexmodal_interfaces.action import Calibrate

from ..calibration.campaign import MAX_RECORD_S, CampaignStop, calibrate, check_settings
from ..calibration.campaign_settings import USER_DESIGNS
from ..calibration.calibration_report import write_params, write_report, write_sidecar
from ..control.excitation import default_excitation_limit
from ..core.errors import FlexmodalError, InputError
from ..core.validation import output_path, per_joint, shown
from .base import declare_output_root, declare_robot_model, declare_typed, run_node
from .guard import GuardedNode, guarded_action_server
from .conversions.calibration_messages import (calibration_feedback, calibration_goal_to_core,
                                               calibration_result_to_response)
from .topic_plant import TopicPlant

REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError)
MOVE_BOUND_S = 10.0          # robot time per move assumed by the duration estimate [s]


class CalibrationServer(GuardedNode):
    """Thin shell: goal → conversions → TopicPlant + :func:`flexmodal_ros.calibration.campaign.calibrate`."""

    def __init__(self, **kwargs):
        super().__init__("calibration", **kwargs)
        self.model = declare_robot_model(self)
        p = {name: declare_typed(self, name, default) for name, default in (
            ("controller", "feedforward_pd_controller"), ("link_state", "absolute"), ("controller_rate_hz", 1000.0),
            ("hold", "zoh-delay"), ("channels", "both"), ("design", "optimal"),
            ("budget", 8), ("validation", 2), ("pulses_per_configuration", 2), ("candidates", 120),
            ("max_budget", 30), ("max_candidates", 500),
            ("max_excitation_torque", [float(v) for v in default_excitation_limit(self.model)]),
            ("max_duration_s", 3600.0), ("wall_factor", 3.0), ("margin_s", 10.0))}
        self.p = p
        limit = p["max_excitation_torque"]
        self.excitation_limit = per_joint(limit, self.model.n, "max_excitation_torque", FlexmodalError)
        for name in ("controller_rate_hz", "max_duration_s", "wall_factor", "margin_s"):
            if not p[name] > 0:
                raise FlexmodalError(f"parameter {name}: must be > 0, got {p[name]}")
        if not (self.excitation_limit > 0).all():
            raise FlexmodalError("parameter max_excitation_torque: must be > 0")
        if p["design"] not in USER_DESIGNS:
            raise FlexmodalError(f"parameter design: unknown value {p['design']!r}; one of {', '.join(USER_DESIGNS)}")
        self.output_directory, _ = declare_output_root(self)        # parameter output_dir
        self.defaults = {"budget": p["budget"], "validation": p["validation"],
                         "pulses_per_configuration": p["pulses_per_configuration"], "candidates": p["candidates"],
                         "excitation_limit": self.excitation_limit, "tracking": False, "design": p["design"]}
        self.runner = ThreadPoolExecutor(1, thread_name_prefix="calibration")
        self._busy = threading.Lock()
        self._stops = {}
        self.group = ReentrantCallbackGroup()
        self.action_server = guarded_action_server(self, Calibrate, "~/calibrate", self.on_execute,
                                                   goal_callback=lambda goal: GoalResponse.ACCEPT,
                                                   cancel_callback=self.on_cancel, callback_group=self.group)
        self.get_logger().info(f"calibration of '{self.model.name}' ready (~/calibrate, controller {p['controller']})")

    # -- goal checks
    def _settings(self, goal):
        """Goal → (CalibrationSettings, output folder); FlexmodalError naming the field."""
        settings, name = calibration_goal_to_core(self.model, goal, self.defaults)
        p = self.p
        if settings.budget > p["max_budget"]:
            raise InputError(f"budget: {settings.budget} is more than the node's max_budget ({p['max_budget']})")
        if settings.candidates > p["max_candidates"]:
            raise InputError(f"candidates: {settings.candidates} is more than max_candidates ({p['max_candidates']})")
        if settings.pulse_torque is not None and np.any(np.asarray(settings.pulse_torque) > self.excitation_limit):
            raise InputError(f"pulse_torque: {float(np.max(settings.pulse_torque)):g} N m is above the excitation "
                             f"limit {self.excitation_limit.tolist()} (parameter max_excitation_torque)")
        check_settings(self.model, settings, p["controller_rate_hz"])
        estimate = self._robot_time(settings)
        if estimate > p["max_duration_s"]:
            raise InputError(f"budget: up to {estimate:.0f} s of robot time, more than max_duration_s "
                             f"({p['max_duration_s']:g} s); lower budget, validation or pulses_per_configuration")
        if name and (name != Path(name).name or name in (".", "..")):
            raise InputError(f"output_name: {shown(name)} must be a plain directory name")
        folder = output_path(self.output_directory, name or time.strftime("calibration_%Y%m%d_%H%M%S"))
        return replace(settings, max_duration_s=p["max_duration_s"]), folder

    def _robot_time(self, s):
        """Upper bound [s] of the robot time of a goal: per configuration a move, the longest
        settling, and each record at its longest."""
        per_config = MOVE_BOUND_S + 3.0 + s.pulses_per_configuration * (s.before_s + MAX_RECORD_S / 3)
        return (s.budget + s.validation) * per_config

    # -- action
    async def on_execute(self, goal_handle):
        result = Calibrate.Result()
        if not self._busy.acquire(blocking=False):
            goal_handle.abort()
            result.message = "busy: a calibration is running (one robot, one calibration at a time)"
            return result
        try:
            try:
                settings, folder = self._settings(goal_handle.request)
            except REQUEST_ERRORS as exc:
                goal_handle.abort()
                result.success, result.message = False, str(exc)
                return result
            deadline = time.monotonic() + self.p["wall_factor"] * self.p["max_duration_s"]
            stop = CampaignStop(deadline)
            key = bytes(goal_handle.goal_id.uuid)
            self._stops[key] = stop
            if goal_handle.is_cancel_requested:
                stop.cancel()
            plant = TopicPlant(self, self.model, self.p["controller"], self.p["link_state"],
                               self.p["controller_rate_hz"], self.p["hold"], self.p["channels"],
                               self.p["wall_factor"], self.p["margin_s"], self.group, stop)
            outcome = Future(executor=self.executor)
            outcome.add_done_callback(lambda _: None)

            def progress(info):
                goal_handle.publish_feedback(calibration_feedback(info, Calibrate.Feedback()))

            def job():
                try:
                    res = calibrate(self.model, plant, settings, folder, progress, stop)
                    files = self._write(res, folder)
                    outcome.set_result((res, files, None))
                except MemoryError:
                    outcome.set_result((None, {}, "out of memory"))
                except REQUEST_ERRORS as exc:
                    outcome.set_result((None, {}, str(exc)))
                except Exception as exc:            # the node never dies of a request
                    outcome.set_result((None, {}, f"calibration failed: {type(exc).__name__}: {exc}"))

            self.runner.submit(job)
            try:
                res, files, error = await outcome
            finally:
                self._stops.pop(key, None)
                plant.destroy()
            if error:
                goal_handle.abort()
                result.success, result.message = False, error
                return result
            calibration_result_to_response(res, result, files.get("params", ""), str(folder))
            if res.success:
                goal_handle.succeed()
            elif stop.cancelled:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return result
        finally:
            self._busy.release()

    def _write(self, result, folder):
        """Sidecar and report always (the data so far), the params YAML only on success."""
        folder.mkdir(parents=True, exist_ok=True)
        files = {}
        params = folder / "calibrated.yaml"
        if result.success:
            files["params"] = write_params(result, params, f"ros ({self.p['controller']})")
        files["sidecar"] = write_sidecar(result, params)
        files.update(write_report(result, folder))
        return files

    def on_cancel(self, goal_handle):
        stop = self._stops.get(bytes(goal_handle.goal_id.uuid))
        if stop is not None:
            stop.cancel()
        return CancelResponse.ACCEPT

    def destroy_node(self):
        # also called by rclpy on a node whose construction a stop signal interrupted: only what was made
        for stop in list(getattr(self, "_stops", {}).values()):
            stop.cancel()
        if hasattr(self, "runner"):
            self.runner.shutdown(wait=False, cancel_futures=True)
        if hasattr(self, "action_server"):
            self.action_server.destroy()
        return super().destroy_node()


def main(args=None):
    return run_node(CalibrationServer, "calibration_server", args,
                    make_executor=lambda: MultiThreadedExecutor(num_threads=4))


if __name__ == "__main__":
    raise SystemExit(main())
