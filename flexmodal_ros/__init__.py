"""flexmodal_ros: modal analysis, identification and control of flexible-joint robots.

The package core (everything outside :mod:`flexmodal_ros.nodes`) is ROS-free; the nodes are thin
rclpy shells around it.
"""

__version__ = "0.1.0"
