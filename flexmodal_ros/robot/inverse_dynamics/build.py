"""C code of the flexible-joint feedforward: generation, operation counts, compilation, cache, loading.

The generated function maps x = [q; q'; q''; q'''; q''''] (5n) to
y = [τ; τ'; τ''; q_m; q_m'; q_m''; τ_m] (7n), thesis (4.6)-(4.10). CasADi builds the SX graph
(:mod:`.symbolic`), merges structurally equal subexpressions (``casadi.cse``) and emits
straight-line C; the system C compiler turns it into a shared library stored in the cache
directory ($FLEXMODAL_CACHE, default ~/.cache/flexmodal_ros) under a SHA-256 of everything the
code depends on, so a model is compiled once per machine. Functions built on the feedforward
(the controller's whole control law, :mod:`flexmodal_ros.control.law`) go through the same
:func:`build_library` with their own generator.
"""
import ctypes
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import casadi as ca
import numpy as np

from ...core.ccompile import atomic_write, cache_dir, compile_shared, writable_cache
from ...core.ccompile import find_compiler as _find_compiler
from ...core.errors import BuildError
from .symbolic import canonical_chain, flexible_joint_quantities, rnea_jets

# -Og with one register-allocation region: on the generated straight-line code (one function of
# 3,000-20,000 statements) gcc spends most of its time in register allocation; these flags halve the
# compile time against -O2 for the same run time (figures: benchmarks/bench_inverse_dynamics.py,
# bench_codegen.py; docs/inverse_dynamics.md).
CFLAGS = ("-Og", "-fira-region=one", "-fPIC", "-shared")
FLEX_FIELDS = ("W", "k", "d_f", "d_c", "d_fm", "d_cm", "B")
OP_CLASSES = ("add", "mul", "div", "trig", "other")
_FALLBACK = ("use FlexibleJointFeedforward(model, compiled=False) (CasADi virtual machine, slower) "
             "or feedforward_numeric(model, ...) (Pinocchio)")


def flex_params(model):
    """Flexibility parameters of a FlexibleJointModel used by (4.7)-(4.10), as float arrays."""
    return {f: np.array(getattr(model, f), dtype=float) for f in FLEX_FIELDS}


def feedforward_function(pin_model, flex=None, name="flexmodal_ff"):
    """CasADi Function x (5n) → y: [τ; τ'; τ''] (3n), plus [q_m; q_m'; q_m''; τ_m] (4n) if ``flex``.

    pin_model: pinocchio.Model (serial/tree of 1-DOF joints, gravity set);
    flex: dict of FLEX_FIELDS arrays (see :func:`flex_params`) or None for the rigid terms only.
    """
    n = pin_model.nv
    x = ca.SX.sym("x", 5 * n)
    qs = ca.vertsplit(x, n)
    tau = rnea_jets(canonical_chain(pin_model), pin_model.gravity.linear, qs)
    outputs = list(tau)
    if flex is not None:
        c = {f: ca.DM(flex[f]) for f in FLEX_FIELDS}
        outputs += flexible_joint_quantities(c["W"], c["k"], c["d_f"], c["d_c"], c["d_fm"], c["d_cm"],
                                             c["B"], *qs[:4], *tau, ca.sign)
    return ca.Function(name, [x], [ca.cse(ca.vertcat(*outputs))])


def emit_c(function):
    """C source text of a CasADi Function (CasADi's code generator, no header)."""
    cg = ca.CodeGenerator(function.name(), {"with_header": False, "casadi_int": "long long int"})
    cg.add(function)
    return cg.dump()


_BINARY = re.compile(r"^\((?:a\d+|[0-9.eE+-]+)([-+*/])a\d+\)$")
_CALL = re.compile(r"^(\w+)\(a\d+(?:,a\d+)?\)$")
_LOGIC = re.compile(r"^\((?:!a\d+|a\d+(?:<|<=|==|!=|&&|\|\|)a\d+|a\d+\?a\d+:0)\)$")
_SKIP = re.compile(r"^(?:arg\[|[-+]?[0-9.]+(?:[eE][-+]?\d+)?$)")
_CALL_CLASS = {"sin": "trig", "cos": "trig", "tan": "trig", "casadi_sq": "mul"}


def count_operations(source):
    """Arithmetic operations in the straight-line body of CasADi-generated C code.

    Classes: add (+, -, unary minus), mul (*, squares), div (/), trig (sin, cos, tan), other
    (sign, sqrt, fmin, comparisons, selections, ...); loads of inputs/constants and output stores
    are not operations.
    Returns a dict with those keys and 'total'.
    """
    counts = dict.fromkeys(OP_CLASSES, 0)
    for line in source.splitlines():
        m = re.match(r"^\s*a\d+=(.*);$", line)
        if not m or _SKIP.match(m.group(1)):
            continue
        rhs = m.group(1)
        if (b := _BINARY.match(rhs)):
            counts[{"+": "add", "-": "add", "*": "mul", "/": "div"}[b.group(1)]] += 1
        elif re.match(r"^\(-a\d+\)$", rhs):
            counts["add"] += 1
        elif (c := _CALL.match(rhs)):
            counts[_CALL_CLASS.get(c.group(1), "other")] += 1
        elif _LOGIC.match(rhs):
            counts["other"] += 1
        else:
            raise RuntimeError(f"count_operations: unrecognised generated statement {line.strip()!r}")
    counts["total"] = sum(counts[k] for k in OP_CLASSES)
    return counts


def model_hash(pin_model, flex, sources=(), parameters=None):
    """SHA-256 (hex) of everything the generated code depends on: model numbers, ``parameters``
    (a dict of further arrays the generator reads), generator source (this package's and the
    files in ``sources``), CasADi version, compiler flags."""
    h = hashlib.sha256()
    h.update(f"{ca.__version__}|{' '.join(CFLAGS)}|".encode())
    for path in (Path(__file__).with_name("symbolic.py"), Path(__file__), *map(Path, sources)):
        h.update(path.read_bytes())
    for key, value in sorted((parameters or {}).items()):
        h.update(key.encode() + np.ascontiguousarray(value, dtype=float).tobytes())
    h.update(np.asarray(pin_model.gravity.linear, dtype=float).tobytes())
    for link in canonical_chain(pin_model):
        h.update(repr((link.parent, link.revolute, link.mass)).encode())
        for arr in (link.R, link.p, link.com, link.inertia_o):
            h.update(np.ascontiguousarray(arr, dtype=float).tobytes())
    for f in FLEX_FIELDS:
        h.update(f.encode() + np.ascontiguousarray(flex[f], dtype=float).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class LibraryInfo:
    """A compiled library: C symbol, paths, robot size n, op counts (``operations_rigid``: of
    τ, τ', τ'' alone for a feedforward library, else None), timings [s]. Stored next to the
    library, so a cache hit needs no code generation."""
    symbol: str
    source: str
    library: str
    n: int
    hash: str
    operations: dict
    generation_s: float
    compile_s: float
    operations_rigid: dict | None = None


def find_compiler():
    """Path of the C compiler ($CC, else cc, else gcc); BuildError naming the fallback if none."""
    return _find_compiler(_FALLBACK)


def model_feedforward_function(model, name):
    """The flexible-joint feedforward of a FlexibleJointModel (default generator of :func:`build_library`)."""
    return feedforward_function(model.pin, flex_params(model), name)


def checked_feedforward_function(model, name):
    """:func:`model_feedforward_function` with a second output Σx: finite exactly when every input
    is finite (or their sum overflows), so one C call also validates the inputs."""
    x = ca.SX.sym("x", 5 * model.n)
    return ca.Function(name, [x], [model_feedforward_function(model, name + "_core")(x), ca.sum1(x)])


FEEDFORWARD_GENERATORS = (model_feedforward_function, checked_feedforward_function)


def rigid_term_operations(function, n):
    """Operation counts of τ, τ', τ'' alone: the first 3n entries of a feedforward function's
    first output, taken from its expression graph (no second, much costlier symbolic RNEA) and
    re-CSE'd — the same counts as ``feedforward_function(pin_model, None)``."""
    x = ca.SX.sym("x", function.size1_in(0))
    out = function(x)
    first = out[0] if isinstance(out, (list, tuple)) else out
    return count_operations(emit_c(ca.Function("rigid_terms", [x], [ca.cse(first[:3 * n])])))


def build_library(model, cache=None, generator=model_feedforward_function, tag="ff", sources=(),
                  parameters=None):
    """Compiled library of ``generator(model, symbol)`` (a CasADi Function of one dense vector;
    default the flexible-joint feedforward) for a FlexibleJointModel, from the cache if present.
    ``tag`` names the kind of function in file and symbol names (flexmodal_<tag>_<hash>); a
    generator outside this package names the files it is written in (``sources``) and the model
    arrays it reads beyond the dynamics and flexibility parameters (``parameters``, e.g. gains):
    both go into the cache key."""
    flex = flex_params(model)
    digest = model_hash(model.pin, flex, sources, parameters)
    folder = Path(cache) if cache is not None else cache_dir()
    stem = folder / f"flexmodal_{tag}_{digest[:16]}"
    meta_path = stem.with_suffix(".json")
    if meta_path.is_file() and stem.with_suffix(".so").is_file():
        try:
            return LibraryInfo(**json.loads(meta_path.read_text()))
        except (ValueError, TypeError):
            pass                                                  # damaged entry: rebuild it
    compiler = find_compiler()
    writable_cache(folder)
    t0 = time.perf_counter()
    symbol = stem.name
    function = generator(model, symbol)
    source = emit_c(function)
    rigid = rigid_term_operations(function, model.n) if generator in FEEDFORWARD_GENERATORS else None
    t1 = time.perf_counter()
    atomic_write(stem.with_suffix(".c"), source.encode())
    compile_shared(compiler, stem.with_suffix(".c"), stem.with_suffix(".so"), CFLAGS, _FALLBACK)
    info = LibraryInfo(symbol, str(stem.with_suffix(".c")), str(stem.with_suffix(".so")), model.n, digest,
                       count_operations(source), t1 - t0, time.perf_counter() - t1, rigid)
    atomic_write(meta_path, json.dumps(asdict(info), indent=1).encode())
    return info


class CompiledFunction:
    """ctypes binding of a generated library: preallocated input/output arrays, one call per eval.

    ``inputs`` and ``outputs`` are the buffers of every argument and result, sized from the library;
    ``x`` and ``y`` are the first of each (5n and 7n for the feedforward). :meth:`run` evaluates
    them in place; :meth:`bind` points an argument or result at another float64 array (no copy).
    Not thread-safe (one instance per thread).
    """

    def __init__(self, info):
        self.info = info
        try:
            lib = ctypes.CDLL(info.library)
            fn = getattr(lib, info.symbol)
        except (OSError, AttributeError) as exc:
            raise BuildError(f"cannot load {info.library} ({exc}); delete it to rebuild, or {_FALLBACK}") from None
        self.inputs, self.outputs = (
            [np.zeros(_dense_size(lib, f"{info.symbol}_sparsity_{io}", i)) for i in range(_count(lib, info.symbol, io))]
            for io in ("in", "out"))
        self.x, self.y = self.inputs[0], self.outputs[0]
        work = ctypes.c_longlong * 1
        sizes = [work() for _ in range(4)]
        getattr(lib, info.symbol + "_work")(*[ctypes.byref(s) for s in sizes])
        self._iw = np.zeros(max(1, sizes[2][0]), dtype=np.int64)
        self._w = np.zeros(max(1, sizes[3][0]))
        self._arg = (ctypes.c_void_p * max(len(self.inputs), sizes[0][0]))(*(a.ctypes.data for a in self.inputs))
        self._res = (ctypes.c_void_p * max(len(self.outputs), sizes[1][0]))(*(a.ctypes.data for a in self.outputs))
        fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
        fn.restype = ctypes.c_int
        self._lib, self._fn = lib, fn
        self._args = (ctypes.addressof(self._arg), ctypes.addressof(self._res),
                      self._iw.ctypes.data, self._w.ctypes.data, 0)

    def run(self):
        """outputs ← f(inputs) (no allocation)."""
        self._fn(*self._args)

    def pointers(self):
        """(function, arg, res, iw, w) addresses of :meth:`run`'s call, for a C caller that
        evaluates the same buffers (signature of CasADi's generated functions)."""
        return (ctypes.cast(self._fn, ctypes.c_void_p).value, *self._args[:4])

    def bind(self, kind: str, index: int, array: np.ndarray):
        """Point argument (``kind`` 'in') or result ('out') ``index`` at ``array`` (float64,
        C-contiguous, the buffer's size; the caller keeps it alive while bound)."""
        buffers, table = (self.inputs, self._arg) if kind == "in" else (self.outputs, self._res)
        if array.dtype != np.float64 or not array.flags.c_contiguous or array.size != buffers[index].size:
            raise ValueError(f"bind: need a C-contiguous float64 array of {buffers[index].size} values")
        if kind == "out" and not array.flags.writeable:
            raise ValueError("bind: result array is read-only")
        table[index] = array.ctypes.data


def _count(lib, symbol, io):
    """Number of arguments (``io`` 'in') or results ('out') of a generated function."""
    fn = getattr(lib, f"{symbol}_n_{io}")
    fn.restype = ctypes.c_longlong
    return int(fn())


def _dense_size(lib, sparsity_symbol, index=0):
    """Entries of argument ``index`` of a generated function, from its CasADi sparsity (rows, cols, ...)."""
    fn = getattr(lib, sparsity_symbol)
    fn.argtypes = [ctypes.c_longlong]
    fn.restype = ctypes.POINTER(ctypes.c_longlong)
    pattern = fn(index)
    return int(pattern[0] * pattern[1])
