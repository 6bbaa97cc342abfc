"""flexmodal_ros.core.workers: worker processes bound to their owner (start, stop, owner death)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from flexmodal_ros.core.workers import WATCH_PERIOD_S, WorkerPool


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):   # gone, or gone while being read (ESRCH)
        return False


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _owner(body):
    """A Python process that owns a pool; its stdout lines and stderr text come back."""
    script = textwrap.dedent("""
        import os, sys, time
        from flexmodal_ros.core.workers import WorkerPool
        if __name__ == "__main__":
        """) + textwrap.indent(textwrap.dedent(body), "    ")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("timeout", [0.0, 0.5])
def test_shutdown_right_after_start_leaves_no_traceback(timeout):
    """The owner ends while its first worker still starts (the forkserver imports SciPy): the
    worker must not fail on the owner's released semaphores (CI of 2026-11-28, bringup)."""
    run = _owner(f"""
        pool = WorkerPool(1, preload=["scipy.linalg", "flexmodal_ros.links.solve"])
        pool.start()
        pool.shutdown(timeout={timeout})
        print("ended")
        """)
    assert run.returncode == 0 and run.stdout.strip() == "ended", run.stderr
    time.sleep(0.5)                     # a failing worker would print after its owner ended
    assert "Traceback" not in run.stderr and "Error" not in run.stderr, run.stderr


def test_shutdown_ends_a_computation_that_ignores_its_token():
    pool = WorkerPool(1)
    pid = pool.submit(os.getpid).result(timeout=60)
    busy = pool.submit(time.sleep, 60.0)
    time.sleep(0.2)
    assert not busy.done()
    t0 = time.monotonic()
    pool.shutdown(timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + 20 * WATCH_PERIOD_S + 1.5
    assert not _wait_gone([pid], 5.0), "the worker outlived shutdown"


def test_workers_end_when_the_owner_is_killed():
    """SIGKILL leaves the owner no chance to clean up: the workers' watchers end them."""
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        from flexmodal_ros.core.workers import WorkerPool
        if __name__ == "__main__":
            pool = WorkerPool(2)
            pids = {pool.submit(os.getpid).result() for _ in range(8)}
            busy = [pool.submit(time.sleep, 120.0) for _ in range(2)]
            print(*pids, flush=True)
            time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
        time.sleep(0.3)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert not _wait_gone(pids, 5.0), "worker processes left running after their owner was killed"


def test_a_shut_down_pool_refuses_work():
    pool = WorkerPool(1)
    pool.shutdown()
    with pytest.raises(Exception, match="cancelled"):
        pool.submit(int)


def test_a_node_stopped_while_it_starts_its_workers_ends_them(ros_env):
    """A stop signal while a node is being built (after its pool started workers, as the
    identification server does in its constructor) reaches run_node as a KeyboardInterrupt with no
    node to destroy: the pool is still shut down (workers.shutdown_all), so the process ends at
    once — a worker busy for 60 s does not hold it — and no worker is left starting on released
    semaphores (the "SemLock._rebuild ... FileNotFoundError" traceback of a CI run)."""
    script = textwrap.dedent("""
        import time
        from flexmodal_ros.core.workers import WorkerPool
        from flexmodal_ros.nodes.base import run_node

        def factory():
            pool = WorkerPool(2, preload=["flexmodal_ros.identification.fit"])
            for _ in range(2):
                pool.submit(int)
            pool.submit(time.sleep, 60.0)
            raise KeyboardInterrupt     # what the stop signal raises while the node is being built

        if __name__ == "__main__":
            print("exit code", run_node(factory, "stopped_node"), flush=True)
        """)
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=ros_env)
    elapsed = time.monotonic() - t0
    assert run.returncode == 0 and "exit code 0" in run.stdout, run.stderr
    assert elapsed < 30.0, f"the process took {elapsed:.1f} s to end"
    time.sleep(0.5)
    assert "Traceback" not in run.stderr, run.stderr
