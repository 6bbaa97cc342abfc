"""Serialized (CDR) messages read and written in place: byte layouts, templates, float64 arrays."""
import array

import numpy as np

from .stamps import split_seconds
import struct


def float64_array(values) -> array.array:
    """A float64 array (any shape, row-major) as the array.array('d') a rosidl float64[] field
    takes as is (a list would be checked element by element by rosidl)."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=float).tobytes())
    return out


class SerializedMessage:
    """A message serialized once by the middleware, then rewritten in place and published as bytes
    (``Publisher.publish`` accepts serialized messages): a 1 kHz publisher skips building and
    converting a message object every period.

    ``msg`` fixes everything but the rewritten fields: its float64[] fields named in ``arrays`` and
    builtin_interfaces/Time fields named in ``stamps`` (dotted paths) are first set to marker
    values, whose unique byte positions in rmw's own serialization locate the fields; the
    encoding (alignment, endianness) therefore stays the middleware's. ``values[path]``: writable
    float64 view of an array field; ``offsets[path]``: byte offset of an array or time field;
    :meth:`set_time` writes a time field; :meth:`serialized` returns the bytes to publish.
    """

    def __init__(self, msg, arrays=(), stamps=()):

        # deferred: builtin_interfaces (ROS message types, built interfaces)
        from builtin_interfaces.msg import Time
        # deferred: rclpy
        from rclpy.serialization import serialize_message

        self._time = struct.Struct("=iI")          # int32 sec, uint32 nanosec
        for k, path in enumerate(arrays):
            _set_path(msg, path, [1e15 + 1e6 * k + i + 0.25 for i in range(len(_get_path(msg, path)))])
        for k, path in enumerate(stamps):
            _set_path(msg, path, Time(sec=2_000_000_011 - k, nanosec=987_654_321 - k))
        self._buffer = bytearray(serialize_message(msg))
        self.values, self.offsets = {}, {}
        for path in arrays:
            marker = np.array(_get_path(msg, path), dtype=float)
            self.offsets[path] = self._locate(marker.tobytes(), path)
            self.values[path] = np.frombuffer(self._buffer, float, marker.size, self.offsets[path])
            self.values[path][:] = 0.0
        for path in stamps:
            t = _get_path(msg, path)
            self.offsets[path] = self._locate(self._time.pack(t.sec, t.nanosec), path)

    def _locate(self, marker, path):
        at = self._buffer.find(marker)
        if at < 0 or self._buffer.find(marker, at + 1) >= 0:
            raise RuntimeError(f"SerializedMessage: field {path} not found exactly once in the serialized message")
        return at

    def set_time(self, path, t):
        """Write time t [s] (>= 0) into the Time field ``path``."""
        self._time.pack_into(self._buffer, self.offsets[path], *split_seconds(t))

    @property
    def buffer(self):
        """The message's serialized bytes, rewritten in place (a bytearray)."""
        return self._buffer

    def serialized(self):
        """The current message as bytes (a copy: safe to publish while the fields are rewritten)."""
        return bytes(self._buffer)


def _get_path(msg, path):
    for name in path.split("."):
        msg = getattr(msg, name)
    return msg


def _set_path(msg, path, value):
    *parents, name = path.split(".")
    setattr(_get_path(msg, ".".join(parents)) if parents else msg, name, value)
