"""ROS 2 node ``joint_identification``: joint stiffness and damping from modal data (thesis ch. 3).

Parameters: ``robot`` (bundled robot name) or ``urdf_path`` + ``params_path``; defaults used when a
request leaves them empty/zero: ``objective`` (determinant|eigenvalue), ``starts`` (30), ``k_max``
(5000), ``d_max`` (100); ``workers`` (multistart processes, default 2); ``time_limit_s`` (600: a
request still running after this long, queueing included, fails with a message);
``max_concurrent_requests`` (2: identifications computed at once; each uses the shared workers)
and ``max_queued_requests`` (16: accepted requests waiting for a slot; beyond that a request is
answered "busy" at once). Integers are accepted for double parameters and integral doubles for
integer ones; any other type ends the node with a one-line error.

Interfaces (same request fields, same result fields):

- service ``~/identify_joint_parameters`` (flexmodal_interfaces/IdentifyJointParameters);
- action ``~/identify`` (flexmodal_interfaces/Identify): feedback with the multistart progress,
  cancellation (the workers stop within one residual evaluation).

Limits of one request (larger ones are answered ``success=false`` naming the field, before any
allocation of that size): starts <= 10000, num_configurations <= 1000, measured modes <= 5000,
precomputed problem <= 512 MiB (flexmodal_ros.identification MAX_*). A request that runs out of
memory, or whose worker process dies, fails with a message; the node keeps serving.

No request can end the node (nodes/base.py :class:`GuardedNode`: an unexpected failure answers
``success=false`` "internal error (...)" or aborts the goal, is logged once, and the node keeps
serving). Callbacks never block an executor thread: requests are converted and checked in the callback,
computed in a request thread (``max_concurrent_requests`` of them) on a persistent
:class:`~flexmodal_ros.core.workers.WorkerPool` owned by the node, and the service / action callbacks
await the outcome as coroutines. Parameter services and new requests are therefore answered
while long identifications run. The pool's processes end with the node, also when it is killed.
"""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.task import Future

from flexmodal_interfaces.action import Identify
from flexmodal_interfaces.srv import IdentifyJointParameters

from ..core.errors import FlexmodalError
from ..identification.fit import check_options, identify
from ..identification.inverse_eigen import (D_MAX_DEFAULT, DEFAULT_OBJECTIVE, DEFAULT_STARTS, K_MAX_DEFAULT, MAX_STARTS,
                                            OBJECTIVES)
from ..identification.measurements import MAX_BOUND
from ..core.workers import Interrupted, WorkerPool
from .base import declare_robot_model, declare_typed, run_node
from .guard import GuardedNode, guarded_action_server
from .conversions import identification_request_to_core, identification_result_to_response

REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError)


class IdentificationServer(GuardedNode):
    """Thin shell: request → conversions → :func:`flexmodal_ros.identification.fit.identify`."""

    def __init__(self, **kwargs):
        super().__init__("joint_identification", **kwargs)
        self.model = declare_robot_model(self)
        self.defaults = dict(objective=declare_typed(self, "objective", DEFAULT_OBJECTIVE),
                             starts=declare_typed(self, "starts", DEFAULT_STARTS),
                             k_max=declare_typed(self, "k_max", K_MAX_DEFAULT),
                             d_max=declare_typed(self, "d_max", D_MAX_DEFAULT))
        workers = declare_typed(self, "workers", 2)
        self.time_limit = declare_typed(self, "time_limit_s", 600.0)
        concurrent = declare_typed(self, "max_concurrent_requests", 2)
        self.max_waiting = concurrent + declare_typed(self, "max_queued_requests", 16)
        self._check_parameters(workers, concurrent)
        self.pool = WorkerPool(workers, preload=["flexmodal_ros.identification.fit"])
        self.runner = ThreadPoolExecutor(concurrent, thread_name_prefix="identification")
        self._lock = threading.Lock()
        self._in_flight = 0
        self._goal_tokens = {}
        group = ReentrantCallbackGroup()
        self.create_service(IdentifyJointParameters, "~/identify_joint_parameters", self.on_identify,
                            callback_group=group)
        self.action_server = guarded_action_server(self, Identify, "~/identify", self.on_execute,
                                                   goal_callback=lambda goal: GoalResponse.ACCEPT,
                                                   cancel_callback=self.on_cancel, callback_group=group)
        for _ in range(workers):                   # start the worker processes now, not at the first request
            self.pool.submit(int)
        self.get_logger().info(f"joint identification for '{self.model.name}' ({self.model.n} joints) ready "
                               f"({workers} worker processes)")

    def _check_parameters(self, workers, concurrent):
        d = self.defaults
        if d["objective"] not in OBJECTIVES:
            raise FlexmodalError(f"parameter objective: must be one of {', '.join(OBJECTIVES)}")
        checks = (("workers", workers, 1, 64), ("starts", d["starts"], 1, MAX_STARTS),
                  ("max_concurrent_requests", concurrent, 1, 64),
                  ("max_queued_requests", self.max_waiting - concurrent, 0, 1000),
                  ("k_max", d["k_max"], 1e-300, MAX_BOUND), ("d_max", d["d_max"], 1e-300, MAX_BOUND),
                  ("time_limit_s", self.time_limit, 1e-3, 1e7))
        for name, value, low, high in checks:
            if not low <= value <= high:
                raise FlexmodalError(f"parameter {name}: must be in [{low:g}, {high:g}], got {value:g}")

    # -- one identification, off the executor
    def _submit(self, request, progress=None):
        """Convert and check ``request`` (FlexmodalError if bad or if the node is busy), then run it
        in a request thread. Returns (rclpy Future of (result, None) or (None, message), token)."""
        kwargs = identification_request_to_core(self.model, request)
        for key, default in self.defaults.items():
            kwargs[key] = default if kwargs[key] is None else kwargs[key]
        check_options(self.model, **kwargs)           # bad options answered now, not after the queue
        with self._lock:
            if self._in_flight >= self.max_waiting:
                raise FlexmodalError(f"busy: {self._in_flight} identifications running or queued "
                                     f"(max_concurrent_requests + max_queued_requests); retry later")
            self._in_flight += 1
        token = self.pool.token(time.monotonic() + self.time_limit)
        outcome = Future(executor=self.executor)
        outcome.add_done_callback(lambda _: None)      # completion wakes the executor: the awaiting callback resumes

        def job():
            try:
                result = identify(self.model, pool=self.pool, stop=token, progress=progress, **kwargs)
                outcome.set_result((result, None))
            except Interrupted as exc:
                outcome.set_result((None, self._interrupted_message(exc)))
            except MemoryError:
                outcome.set_result((None, "out of memory: the request is too large for this machine"))
            except REQUEST_ERRORS as exc:
                outcome.set_result((None, str(exc)))
            except Exception as exc:                    # e.g. a worker process died (BrokenProcessPool)
                outcome.set_result((None, f"identification failed: {type(exc).__name__}: {exc}"))
            finally:
                with self._lock:
                    self._in_flight -= 1

        self.runner.submit(job)
        return outcome, token

    def _interrupted_message(self, exc):
        if exc.reason == "time limit":
            return (f"time limit of {self.time_limit:g} s reached (parameter time_limit_s): use fewer starts "
                    "or measurements, or raise time_limit_s")
        return "cancelled"

    async def on_identify(self, request, response):
        try:
            outcome, token = self._submit(request)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        try:
            result, error = await outcome
        finally:
            self.pool.release(token)
        return _failed(response, error) if error else identification_result_to_response(result, response)

    async def on_execute(self, goal_handle):
        response = Identify.Result()
        started = time.monotonic()

        def progress(done, total, best):
            goal_handle.publish_feedback(Identify.Feedback(starts_done=done, starts_total=total,
                                                           best_objective=float(best),
                                                           elapsed_s=time.monotonic() - started))
        try:
            outcome, token = self._submit(goal_handle.request, progress)
        except REQUEST_ERRORS as exc:
            goal_handle.abort()
            return _failed(response, exc)
        key = bytes(goal_handle.goal_id.uuid)
        self._goal_tokens[key] = token
        if goal_handle.is_cancel_requested:
            self.pool.cancel(token)
        try:
            result, error = await outcome
        finally:
            self._goal_tokens.pop(key, None)
            self.pool.release(token)
        if error:
            goal_handle.canceled() if goal_handle.is_cancel_requested else goal_handle.abort()
            return _failed(response, error)
        goal_handle.succeed()
        return identification_result_to_response(result, response)

    def on_cancel(self, goal_handle):
        token = self._goal_tokens.get(bytes(goal_handle.goal_id.uuid))
        if token is not None:
            self.pool.cancel(token)
        return CancelResponse.ACCEPT

    def destroy_node(self):
        # also called by rclpy on a node whose construction a stop signal interrupted: only what was made
        if hasattr(self, "pool"):
            self.pool.shutdown()                        # running identifications stop at once
        if hasattr(self, "runner"):
            self.runner.shutdown(wait=False, cancel_futures=True)
        if hasattr(self, "action_server"):
            self.action_server.destroy()
        return super().destroy_node()


def _failed(response, exc):
    response.success, response.message = False, str(exc)
    return response


def main(args=None):
    return run_node(IdentificationServer, "identification_server", args,
                    make_executor=lambda: MultiThreadedExecutor(num_threads=4))


if __name__ == "__main__":
    raise SystemExit(main())
