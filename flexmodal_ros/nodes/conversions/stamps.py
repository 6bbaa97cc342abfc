"""ROS time stamps ↔ seconds, and the stamp of a serialized message read in place."""


from ...core.errors import InputError
import struct


def stamp_to_seconds(stamp):
    """builtin_interfaces/Time → float seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def split_seconds(t):
    """float seconds (>= 0) → (sec, nanosec) of builtin_interfaces/Time, rounded to the nanosecond."""
    return divmod(int(round(t * 1e9)), 1_000_000_000)


def seconds_to_stamp(t):
    """float seconds (>= 0) → builtin_interfaces/Time."""
    # deferred: builtin_interfaces (ROS message types, built interfaces)
    from builtin_interfaces.msg import Time

    sec, nanosec = split_seconds(t)
    return Time(sec=sec, nanosec=nanosec)


def serialized_stamp_ns(buf):
    """header.stamp [ns] of a CDR-serialized std_msgs/Header-first message (e.g. JointState): the
    stamp's sec (int32) and nanosec (uint32) follow the 4-byte encapsulation header, whose second
    byte gives the byte order (1 = little endian)."""

    buf = bytes(buf)
    if len(buf) < 12:
        raise InputError(f"joint_states: {len(buf)} bytes is no serialized JointState")
    sec, nanosec = struct.unpack_from("<iI" if buf[1] == 1 else ">iI", buf, 4)
    return sec * 1_000_000_000 + nanosec
