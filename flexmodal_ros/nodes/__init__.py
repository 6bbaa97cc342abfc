"""rclpy nodes of flexmodal_ros: thin shells around the ROS-free core (no numerics here).

Message <-> core-type conversion lives only in :mod:`flexmodal_ros.nodes.conversions`.
"""
