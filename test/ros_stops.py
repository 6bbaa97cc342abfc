"""What a node's stop may print when the middleware stalls it (nodes/entry_points.py, STOP_BOUND_S)."""
import inspect

from flexmodal_ros.nodes import base


def _run_node_clean_up_lines():
    """Line numbers of run_node's clean-up in nodes/base.py: from its function-level ``except
    (KeyboardInterrupt, ...)`` (the spin loop has ended) to the end of the function."""
    lines, first = inspect.getsourcelines(base.run_node)
    start = next(i for i, line in enumerate(lines) if line.startswith("    except (KeyboardInterrupt"))
    return range(first + start, first + len(lines))


def stalled_in_rclpy_teardown(text):
    """Whether ``text`` (a node's output) holds the stop bound's dump of a main thread stalled inside
    rclpy's destruction of a node, an entity or the context, i.e. in the middleware (Fast DDS 3.2:
    eProsima/Fast-DDS#6513, or its deadlock between a writer's removal and a discovery thread;
    docs/ros_robustness.md, "Shutdown"), under run_node's clean-up. Such a node ends with exit code 1.

    Two shapes count: the innermost frame is in rclpy and destroys something (``destroy_node``,
    ``Context.destroy``...), or it is run_node itself on one of its clean-up lines with no Python
    frame above it, i.e. in native code run there: rclpy's C++ destructors of the entities the
    interrupted spin's traceback held, freed when run_node's ``except`` clause releases it (CI,
    Jazzy: identification_server stopped by the bringup, dump at base.py's ``pass``). A stall in
    the project's own clean-up code shows its Python frames above run_node and does not count."""
    if "Timeout (" not in text:
        return False
    clean_up = _run_node_clean_up_lines()
    for block in text[text.index("Timeout ("):].split("Thread 0x")[1:]:
        frames = [line.strip() for line in block.splitlines() if line.strip().startswith("File ")]
        if any(line.endswith(" in run_node") for line in frames):
            innermost = frames[0]
            if innermost.endswith(" in run_node") and "/flexmodal_ros/nodes/base.py" in innermost:
                return int(innermost.rsplit(", line ", 1)[1].split()[0]) in clean_up
            return "/rclpy/" in innermost and "destroy" in innermost
    return False
