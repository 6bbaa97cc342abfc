"""What a node's stop may print when the middleware stalls it (nodes/entry_points.py, STOP_BOUND_S)."""


def stalled_in_rclpy_teardown(text):
    """Whether ``text`` (a node's output) holds the stop bound's dump of a main thread stalled inside
    rclpy's destruction of a node, an entity or the context, i.e. in the middleware (Fast DDS 3.2:
    eProsima/Fast-DDS#6513, or its deadlock between a writer's removal and a discovery thread;
    docs/ros_robustness.md, "Shutdown"), under run_node's clean-up. Such a node ends with exit code 1."""
    if "Timeout (" not in text:
        return False
    for block in text[text.index("Timeout ("):].split("Thread 0x")[1:]:
        frames = [line for line in block.splitlines() if line.strip().startswith("File ")]
        if any(line.endswith(" in run_node") for line in frames):
            return "/rclpy/" in frames[0] and "destroy" in frames[0]
    return False
