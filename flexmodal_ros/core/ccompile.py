"""C compilation with a per-machine cache: the compiler, the cache directory, atomic writes.

Shared by the generated feedforward and control-law libraries
(:mod:`flexmodal_ros.robot.inverse_dynamics.build`) and the small hand-written kernels shipped as C
sources next to the modules that load them (:func:`kernel_library`, e.g. the batched LAPACK loop
of :mod:`flexmodal_ros.linalg.lapack`). Light on purpose: the modal server imports it (no CasADi here).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from .errors import BuildError

KERNEL_CFLAGS = ("-O2", "-fPIC", "-shared")


def cache_dir() -> Path:
    """Directory of compiled libraries: $FLEXMODAL_CACHE or ~/.cache/flexmodal_ros."""
    return Path(os.environ.get("FLEXMODAL_CACHE") or Path.home() / ".cache" / "flexmodal_ros")


def find_compiler(fallback: str = "") -> str:
    """Path of the C compiler ($CC, else cc, else gcc); BuildError (ending with ``fallback``, what
    the caller can do instead) if none."""
    for cand in (os.environ.get("CC"), "cc", "gcc"):
        if cand and (path := shutil.which(cand)):
            return path
    raise BuildError(f"no C compiler found (tried $CC, cc, gcc): install gcc or set CC{', or ' if fallback else ''}"
                     f"{fallback}")


def writable_cache(folder: Path) -> Path:
    """``folder`` created if missing; BuildError naming $FLEXMODAL_CACHE if it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cache directory {folder} not writable ({exc}); set FLEXMODAL_CACHE") from None
    return folder


def atomic_write(path: Path, data: bytes):
    """Write ``data`` to ``path`` through a temporary file and a rename (readers never see a part)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def compile_shared(compiler: str, source: Path, library: Path, flags, fallback: str = ""):
    """``compiler flags source -o library -lm``, the library appearing atomically; BuildError with
    the compiler's first line of output (and ``fallback``) on failure."""
    fd, tmp = tempfile.mkstemp(dir=library.parent, prefix=library.name + ".", suffix=".so")
    os.close(fd)
    cmd = [compiler, *flags, str(source), "-o", tmp, "-lm"]
    tail = f"; {fallback}" if fallback else ""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        os.unlink(tmp)
        raise BuildError(f"C compiler {compiler} could not run ({exc}){tail}") from None
    if proc.returncode != 0:
        os.unlink(tmp)
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        raise BuildError(f"compiling {source} failed ({first}){tail}")
    os.replace(tmp, library)


def kernel_library(source: Path, flags=KERNEL_CFLAGS, cache: Path | None = None) -> Path:
    """Shared library of the hand-written C file ``source``, compiled once per machine: cached as
    ``<stem>_<hash>.so`` under a SHA-256 of the source text, the flags and the compiler path.
    BuildError when no compiler is found, the cache is not writable or compilation fails."""
    compiler = find_compiler()
    text = Path(source).read_bytes()
    digest = hashlib.sha256(text + "|".join((*flags, compiler)).encode()).hexdigest()[:16]
    folder = writable_cache(Path(cache) if cache is not None else cache_dir())
    library = folder / f"{Path(source).stem}_{digest}.so"
    if not library.is_file():
        copy = folder / f"{Path(source).stem}_{digest}.c"
        atomic_write(copy, text)
        compile_shared(compiler, copy, library, flags)
    return library


def load_kernel(source: Path, symbol: str, argtypes, restype, owner: str, instead: str):
    """The ctypes function ``symbol`` of the hand-written C file ``source`` (:func:`kernel_library`),
    or None when it cannot be built or loaded: then one RuntimeWarning, "<owner>: the C kernel is
    unavailable (<why>); <instead>", says so and what the caller does instead."""
    try:
        fn = getattr(ctypes.CDLL(str(kernel_library(source))), symbol)
    except (BuildError, OSError, AttributeError) as exc:
        warnings.warn(f"{owner}: the C kernel is unavailable ({exc}); {instead}", RuntimeWarning, stacklevel=3)
        return None
    fn.argtypes, fn.restype = argtypes, restype
    return fn
