"""ROS 2 bags (sqlite3 and MCAP storage) without a ROS install, through the maintained
``rosbags`` library: read sensor_msgs/JointState into a :class:`~flexmodal_ros.oma.record.Record`,
write records (or serialized messages recorded by a node) as bags.

A JointState's header stamp is the sample time (the bag's receive time only when the stamp is
zero); each requested joint becomes one channel: its ``position`` (motor joints are named
``<joint>_motor`` by the flexible-joint simulator).

The end of the excitation, when known (a simulated impact, or a recorder that triggered the
impulse), is stored on the topic ``EXCITATION_TOPIC`` as one builtin_interfaces/msg/Time in the
JointState stamps' clock; :func:`read_joint_states` uses it as the start of the free decay instead
of guessing it from the response. The record's metadata (e.g. the simulated impulse, which the
model comparison uses) go on ``METADATA_TOPIC`` as JSON.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import json

from ..core.errors import InputError
from .record import Record, checked_metadata, make_record
from ..core.validation import shown

JOINT_STATE = "sensor_msgs/msg/JointState"
STORAGES = ("sqlite3", "mcap")
EXCITATION_TOPIC = "/flexmodal/excitation_end"
EXCITATION_TYPE = "builtin_interfaces/msg/Time"
METADATA_TOPIC = "/flexmodal/record_metadata"   # std_msgs/msg/String: the record's metadata as JSON
STRING = "std_msgs/msg/String"
CLI_FIELDS = {"bag": "--bag", "topic": "--topic", "joints": "--joints"}   # names in messages (flexmodal oma)
# RunModalTest (the modal_test node records the bag itself; its channels field names the joints)
REQUEST_FIELDS = {"bag": "recorded bag", "topic": "recorded topic", "joints": "channels"}


def _typestore():
    # deferred: rosbags
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(Stores.ROS2_KILTED)


def _bag_dir(path, field="--bag"):
    """The bag directory (rosbags opens directories; a .db3/.mcap file's parent is taken)."""
    path = Path(path)
    if path.is_file() and path.suffix in (".db3", ".mcap"):
        path = path.parent
    if not path.is_dir() or not (path / "metadata.yaml").is_file():
        raise InputError(f"{field}: {path} is not a ROS 2 bag (directory with metadata.yaml, or its .db3/.mcap file)")
    return path


def read_joint_states(path, topic: str = "/joint_states", joints=None, start=None, end=None,
                      fields=None) -> Record:
    """Record of the ``joints`` positions (default: every name of the first message) from the
    JointState ``topic`` of the bag at ``path``; ``start``/``end`` [s] relative to the first sample.
    ``fields`` names bag, topic and joints in messages as the caller's user wrote them (default
    CLI_FIELDS, the options of ``flexmodal oma``; REQUEST_FIELDS for RunModalTest).

    InputError: not a bag, topic absent or of another type, unknown joint names, messages whose
    name list lacks a requested joint or whose sizes disagree, NaN, non-monotonic stamps, too short.
    """
    # deferred: rosbags
    from rosbags.rosbag2 import Reader
    # deferred: rosbags
    from rosbags.rosbag2.errors import ReaderError

    store = _typestore()
    names_of = {**CLI_FIELDS, **(fields or {})}
    bag_field, topic_field, joints_field = names_of["bag"], names_of["topic"], names_of["joints"]
    excitation, metadata = None, {}
    try:
        with Reader(_bag_dir(path, bag_field)) as reader:
            marks = [c for c in reader.connections if c.topic == EXCITATION_TOPIC and c.msgtype == EXCITATION_TYPE]
            for conn, _, raw in (reader.messages(connections=marks) if marks else ()):   # [] would mean all
                mark = store.deserialize_cdr(raw, conn.msgtype)
                excitation = mark.sec + 1e-9 * mark.nanosec
                break
            notes = [c for c in reader.connections if c.topic == METADATA_TOPIC and c.msgtype == STRING]
            for conn, _, raw in (reader.messages(connections=notes) if notes else ()):
                text = store.deserialize_cdr(raw, conn.msgtype).data
                try:
                    metadata = json.loads(text)
                except ValueError as exc:
                    raise InputError(f"{bag_field} {path}: {METADATA_TOPIC} is not JSON ({exc})") from None
                metadata = checked_metadata(metadata, f"{bag_field} {path}: {METADATA_TOPIC}")
                break
            conns = [c for c in reader.connections if c.topic == topic]
            if not conns:
                raise InputError(f"{topic_field}: the bag has no topic {topic} (topics: "
                                 f"{', '.join(sorted({c.topic for c in reader.connections})) or 'none'})")
            bad = [c.msgtype for c in conns if c.msgtype != JOINT_STATE]
            if bad:
                raise InputError(f"{topic_field}: {topic} carries {bad[0]}, not {JOINT_STATE}")
            stamps, rows, names = [], [], None
            for conn, recv, raw in reader.messages(connections=conns):
                msg = store.deserialize_cdr(raw, conn.msgtype)
                if names is None:
                    names = list(joints) if joints else list(msg.name)
                    unknown = [j for j in names if j not in msg.name]
                    if unknown:
                        raise InputError(f"{joints_field}: unknown joint(s) {', '.join(unknown)} (the bag's "
                                         f"{topic} has {', '.join(msg.name)})")
                index = {n: i for i, n in enumerate(msg.name)}
                if len(msg.position) != len(msg.name) or any(j not in index for j in names):
                    raise InputError(f"{topic}: message {len(rows)} lacks some of {names} or its position "
                                     f"size ({len(msg.position)}) differs from its names ({len(msg.name)})")
                stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
                stamps.append(stamp if stamp > 0 else 1e-9 * recv)
                rows.append(np.asarray(msg.position, float)[[index[j] for j in names]])
    except ReaderError as exc:
        raise InputError(f"{bag_field} {path}: cannot read ({exc})") from None
    if not rows:
        raise InputError(f"{topic_field}: {topic} has no messages in the bag")
    t = np.asarray(stamps)
    record = make_record(t - t[0], np.array(rows), names, None if excitation is None else excitation - t[0],
                         metadata={**metadata, "file": str(path), "topic": topic})
    return record.window(start, end) if (start is not None or end is not None) else record


def write_joint_states(path, record: Record, topic: str = "/joint_states", storage: str = "sqlite3") -> Path:
    """Write ``record`` as sensor_msgs/JointState messages (positions of its channels, stamped
    at t) to a new bag directory ``path`` with ``storage`` sqlite3 or mcap; a known
    ``record.excitation_end`` goes on EXCITATION_TOPIC."""
    # deferred: rosbags
    from rosbags.typesys.stores.ros2_kilted import (builtin_interfaces__msg__Time as Time,
                                                     sensor_msgs__msg__JointState as JointState,
                                                     std_msgs__msg__Header as Header,
                                                     std_msgs__msg__String as String)

    store = _typestore()
    messages = []
    for tk, row in zip(record.t, record.values):
        sec, nanosec = divmod(int(round(tk * 1e9)), 1_000_000_000)
        msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=""),
                         name=list(record.channels), position=np.ascontiguousarray(row, float),
                         velocity=np.empty(0), effort=np.empty(0))
        messages.append((int(round(tk * 1e9)), store.serialize_cdr(msg, JOINT_STATE)))
    extra = {}
    if record.excitation_end is not None:
        stamp = int(round(record.excitation_end * 1e9))
        sec, nanosec = divmod(stamp, 1_000_000_000)
        extra[(EXCITATION_TOPIC, EXCITATION_TYPE)] = [
            (stamp, store.serialize_cdr(Time(sec=sec, nanosec=nanosec), EXCITATION_TYPE))]
    if record.metadata:
        first = int(round(record.t[0] * 1e9))
        extra[(METADATA_TOPIC, STRING)] = [
            (first, store.serialize_cdr(String(data=json.dumps(record.metadata, default=str)), STRING))]
    return write_serialized(path, messages, topic, storage, extra=extra)


def write_serialized(path, messages, topic: str = "/joint_states", storage: str = "sqlite3",
                     msgtype: str = JOINT_STATE, extra=None) -> Path:
    """Write already CDR-serialized messages [(time ns, bytes), ...] of ``msgtype`` (as taken from
    a raw rclpy subscription) to a new bag ``path``; ``extra``: {(topic, msgtype): messages} of
    further topics."""
    # deferred: rosbags
    from rosbags.rosbag2 import StoragePlugin, Writer

    if storage not in STORAGES:
        raise InputError(f"storage: must be one of {', '.join(STORAGES)}, got {shown(storage)}")
    path = Path(path)
    if path.exists():
        raise InputError(f"bag: {path} already exists")
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conn = writer.add_connection(topic, msgtype, typestore=_typestore())
        for stamp_ns, raw in messages:
            writer.write(conn, int(stamp_ns), bytes(raw))
        for (other, other_type), items in (extra or {}).items():
            other_conn = writer.add_connection(other, other_type, typestore=_typestore())
            for stamp_ns, raw in items:
                writer.write(other_conn, int(stamp_ns), bytes(raw))
    return path
