"""Input checks shared by the core, the CLI and the nodes.

Each check returns a clean float array or raises the given :class:`~flexmodal_ros.core.errors.FlexmodalError`
subclass with a message that names the field.

Files given by users (params/data YAML, URDF, CSV) are read by :func:`read_text_file`: regular
files only (a FIFO or a device such as /dev/zero is refused without blocking), at most
``MAX_FILE_BYTES``, UTF-8. YAML goes through :func:`load_yaml_text`, which counts the nodes of the
document *after* alias expansion before building any Python object (a few hundred bytes of nested
aliases can stand for billions of nodes) and refuses more than ``MAX_YAML_NODES``, and refuses a
key written twice in one mapping (YAML 1.2 forbids it; PyYAML would keep the last one silently),
naming its key path. Messages echo user values through :func:`shown` (at most ``MAX_ECHO``
characters). Names that become file names go through :func:`safe_filename` / :func:`output_path`.

Files and directories the user asks to be written (``-o``, ``--out-dir``, ...) are checked before
any work by :func:`output_file` / :func:`output_directory` (an existing target must be a regular
file / a directory; the parent must exist and be writable; checked by creating and removing a
probe file, which also holds for root and read-only file systems), and written through
:func:`write_output`, which turns an OS error during the write (disk full, /dev/full, ...) into the
same one-line error naming the option.
"""
import os
import re
import stat
import tempfile
import warnings
from pathlib import Path

import numpy as np
import yaml

from .errors import InputError

MAX_FILE_BYTES = 16 * 2 ** 20      # input files (YAML, URDF, CSV) [bytes]
MAX_YAML_NODES = 1_000_000         # YAML nodes after alias expansion
MAX_ECHO = 80                      # characters of a user value quoted in an error message
_LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))   # PyYAML's C parser when built with it


def finite_array(value, field, shape=None, error=InputError):
    """Return ``value`` as a float array, checking that it is numeric, finite and of ``shape``.

    ``shape`` entries may be ``None`` (any size along that axis).
    """
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{field}: expected numbers, got {shown(value)}") from None
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "x".join("*" if s is None else str(s) for s in shape) or "scalar"
            raise error(f"{field}: expected shape {want}, got {'x'.join(map(str, arr.shape)) or 'scalar'}")
    if not np.all(np.isfinite(arr)):
        raise error(f"{field}: contains NaN or inf")
    return arr


def finite_vector(value, n, field, error=InputError):
    """A finite float vector of length ``n`` (``n=None``: any length)."""
    return finite_array(value, field, (n,), error)


def positive(value, field, error=InputError):
    """A finite scalar or array whose entries are all > 0."""
    arr = finite_array(value, field, error=error)
    if np.any(arr <= 0):
        raise error(f"{field}: must be > 0, got {_show(arr)}")
    return arr


def nonnegative(value, field, error=InputError):
    """A finite scalar or array whose entries are all >= 0."""
    arr = finite_array(value, field, error=error)
    if np.any(arr < 0):
        raise error(f"{field}: must be >= 0, got {_show(arr)}")
    return arr


def per_joint(value, n, field, error=InputError):
    """Broadcast a scalar or a length-``n`` sequence to a finite vector of length ``n``."""
    arr = finite_array(value, field, error=error)
    if arr.ndim == 0 or arr.size == 1:
        return np.full(n, float(arr.reshape(-1)[0]))
    if arr.shape != (n,):
        raise error(f"{field}: expected 1 or {n} values, got {arr.size}")
    return arr


def finite_scalar(value, field, error=InputError):
    """One finite number as a float."""
    return float(finite_array(value, field, (), error))


def frozen(values):
    """Read-only array copy (fields of the immutable result and model objects)."""
    arr = np.array(values)
    arr.setflags(write=False)
    return arr


def reject_unknown_keys(mapping, allowed, field, error=InputError):
    """Error naming every key of ``mapping`` that is not in ``allowed`` (typos never pass silently)."""
    unknown = sorted(set(map(str, mapping)) - set(allowed))
    if unknown:
        raise error(f"{field}: unknown key(s) {shown_names(unknown)} (allowed: {', '.join(sorted(allowed))})")


def require_keys(mapping, required, field, error=InputError):
    """Error naming the first key of ``required`` (in its order) that ``mapping`` lacks."""
    for key in required:
        if key not in mapping:
            raise error(f"{field}.{key}: missing")


def shown(value, limit=MAX_ECHO):
    """``repr(value)`` cut to ``limit`` characters (user values quoted in error messages)."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > limit:   # no repr of a huge container
        text = f"<{type(value).__name__} of {len(value)} items>"
    else:
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text)} characters)"


def shown_names(names, limit=10):
    """Comma-separated names for a message, at most ``limit``: each as it is, or through :func:`shown`
    (quoted, cut) if it is long, empty, blank at an end or not printable."""
    names = list(names)
    parts = [n if isinstance(n, str) and 0 < len(n) <= MAX_ECHO and n.isprintable() and n.strip() == n else shown(n)
             for n in names[:limit]]
    return ", ".join(parts) + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def read_file_bytes(path, what, error=InputError, max_bytes=MAX_FILE_BYTES):
    """Contents of the regular file ``path`` (at most ``max_bytes``); errors name the file.

    Opened non-blocking, so a FIFO without writer does not hang; anything but a regular file
    (FIFO, device such as /dev/zero, directory, socket) is refused before reading."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"{what} {path}: cannot read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path}: not a regular file ({_file_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise error(f"{what} {path}: {info.st_size} bytes, more than the limit of {max_bytes}")
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"{what} {path}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise error(f"{what} {path}: more than the limit of {max_bytes} bytes")
    return b"".join(chunks)


def read_text_file(path, what, error=InputError, max_bytes=MAX_FILE_BYTES):
    """:func:`read_file_bytes` decoded as UTF-8; the error names the first invalid byte."""
    data = read_file_bytes(path, what, error, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start})") from None


def _file_kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def load_yaml_text(text, what, error=InputError, max_nodes=MAX_YAML_NODES):
    """Parse one YAML document with the safe loader after checking that it stands for at most
    ``max_nodes`` nodes once aliases are expanded (and that no alias refers to itself). PyYAML's
    C parser (libyaml, in its wheels) composes the document when present: 1.7 s instead of 12 s
    for a 0.7 MB file of 20,000 waypoints on the loaded 2-core development machine."""
    loader = yaml.CSafeLoader(text) if _LIBYAML else _pure_python_loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        count = _expanded_nodes(node, max_nodes)
        if count > max_nodes:
            raise error(f"{what}: the YAML stands for more than {max_nodes} nodes once its aliases "
                        "are expanded (nested anchors/aliases); write the data out instead")
        _refuse_duplicate_keys(node, what, error)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(f"{what}: malformed YAML: {shown(' '.join(str(exc).split()), 300)}") from None
    except RecursionError:
        raise error(f"{what}: YAML nested too deeply") from None
    finally:
        loader.dispose()


_warned = []


def _pure_python_loader(text):
    if not _warned:
        _warned.append(True)
        warnings.warn("PyYAML without libyaml: YAML files are parsed in pure Python (about 7x slower)",
                      RuntimeWarning, stacklevel=3)
    return yaml.SafeLoader(text)


def _expanded_nodes(root, limit):
    """Nodes of the composed YAML graph counted as if every alias were a copy (stops above
    ``limit``); iterative, memoized per node, so the count costs the size of the file."""
    size, state, stack = {}, {}, [root]
    while stack:
        node = stack[-1]
        key = id(node)
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        if state.get(key) is None:
            state[key] = "open"
            pending = [c for c in children if id(c) not in size]
            for child in pending:
                if state.get(id(child)) == "open":
                    raise yaml.YAMLError("an alias refers to a node that contains it (recursive structure)")
            stack.extend(pending)
            if pending:
                continue
        stack.pop()
        if key not in size:
            size[key] = min(limit + 1, 1 + sum(size[id(c)] for c in children))
            state[key] = "done"
        if size[key] > limit:
            return size[key]
    return size[id(root)]


def _refuse_duplicate_keys(root, what, error):
    """Error naming the first key (as a dotted path, with its line) written twice in one mapping
    of the composed document. Merge keys (``<<``) may override keys: only keys written in the
    mapping itself count. Each node is visited once (aliases share nodes)."""
    seen, stack = set(), [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = {}
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":
                    continue
                name = key.value if isinstance(key, yaml.ScalarNode) else f"<{key.id} key>"
                label = f"{path}.{name}" if path else str(name)
                if isinstance(key, yaml.ScalarNode):
                    token = (key.tag, key.value)
                    if token in keys:
                        raise error(f"{what}: duplicate key {shown(label)} (line {key.start_mark.line + 1}; "
                                    f"first at line {keys[token] + 1}): each key may appear once")
                    keys[token] = key.start_mark.line
                stack.append((value, label))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))


def load_yaml_mapping(path, what, error=InputError):
    """Read a YAML file whose top level is a mapping (:func:`read_text_file`,
    :func:`load_yaml_text`); errors name the file and what is wrong."""
    path = Path(path)
    raw = load_yaml_text(read_text_file(path, what, error), f"{what} {path}", error)
    if not isinstance(raw, dict):
        raise error(f"{what} {path}: expected a YAML mapping at top level")
    return raw


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(name, fallback="robot", limit=64):
    """``name`` reduced to a plain file-name component: characters other than letters, digits,
    '.', '_', '-' become '_', no leading dots or dashes (no '..', no hidden file, no option)."""
    text = _UNSAFE_FILENAME.sub("_", str(name)).lstrip(".-")[:limit]
    return text or fallback


def output_path(folder, name, suffix=""):
    """``folder / (safe_filename(name) + suffix)``, guaranteed to lie inside ``folder``."""
    folder = Path(folder)
    path = folder / (safe_filename(name) + suffix)
    if path.resolve().parent != folder.resolve():
        raise InputError(f"output file name {shown(name)}: would leave {folder}")
    return path


def output_file(path, field, error=InputError):
    """``path`` as a file the command may write, checked before any work: an existing ``path``
    must be a regular file (not a directory, FIFO or device such as /dev/full), its directory must
    exist and accept a new file. Returns the Path; errors name ``field`` (the option or request
    field as the user wrote it)."""
    path, info = _output_target(path, field, "file", error)
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise error(f"{field} {path}: not a regular file ({_file_kind(info.st_mode)})")
    parent = path.parent
    try:
        parent_info = os.stat(parent)
    except OSError as exc:
        reason = "does not exist" if isinstance(exc, FileNotFoundError) else exc.strerror
        raise error(f"{field} {path}: directory {parent} {reason}") from None
    if not stat.S_ISDIR(parent_info.st_mode):
        raise error(f"{field} {path}: {parent} is not a directory ({_file_kind(parent_info.st_mode)})")
    _probe(parent, f"{field} {path}", error)
    if info is not None and not os.access(path, os.W_OK):
        raise error(f"{field} {path}: cannot write (permission denied)")
    return path


def output_directory(path, field, error=InputError):
    """``path`` as a directory the command may write into, created with its parents if missing
    and checked before any work (an existing ``path`` must be a directory; a probe file must be
    creatable in it). Returns the Path; errors name ``field``."""
    path, info = _output_target(path, field, "directory", error)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        kind = "a regular file" if stat.S_ISREG(info.st_mode) else _file_kind(info.st_mode)
        raise error(f"{field} {path}: not a directory ({kind})")
    if info is None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise error(f"{field} {path}: cannot create the directory ({exc.strerror})") from None
    _probe(path, f"{field} {path}", error)
    return path


def _output_target(path, field, what, error):
    """(Path, os.stat result or None if it does not exist) of an output ``what`` (file/directory)."""
    path = Path(path)
    if not str(path).strip():
        raise error(f"{field}: empty {what} name")
    try:
        return path, os.stat(path)
    except FileNotFoundError:
        return path, None
    except OSError as exc:
        raise error(f"{field} {path}: cannot use as output {what} ({exc.strerror})") from None


def _probe(directory, where, error):
    """Create and remove a file in ``directory`` (write permission, read-only file systems and
    root all answer truthfully only to an attempt)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".flexmodal-probe-", dir=directory)
    except OSError as exc:
        raise error(f"{where}: cannot write in {directory} ({exc.strerror})") from None
    os.close(fd)
    try:
        os.unlink(name)
    except OSError as exc:      # the directory is writable (the check passed); say what is left behind
        warnings.warn(f"{where}: could not remove the probe file {name} ({exc.strerror}); delete it by hand",
                      RuntimeWarning, stacklevel=3)


def write_output(path, field, write, error=InputError):
    """Run ``write(path)`` (a function writing the file) for a file checked by
    :func:`output_file`; an OS error while writing (disk full, quota, /dev/full, the file replaced
    meanwhile) becomes one error naming ``field``. Returns what ``write`` returns."""
    try:
        return write(Path(path))
    except OSError as exc:
        target = exc.filename or path
        raise error(f"{field} {target}: cannot write ({exc.strerror or exc})") from None


def _show(arr):
    return f"{float(arr):g}" if arr.ndim == 0 else np.array2string(arr, precision=6)
