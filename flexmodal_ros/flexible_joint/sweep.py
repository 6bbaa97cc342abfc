"""Modal maps over many configurations (thesis §2.4.2, Figs. 2.3-2.5; App. II grids).

Configuration sets (grid, straight line), the flexible-joint modal map (batch modal analysis,
MAC tracking with crossings reported — :mod:`flexmodal_ros.modes.modeset`, which also writes CSV / JSON /
PNG) and gain sweeps (K_D = 0.425 √K_P, Fig. 2.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.flexible_joint.ama import ModalResult, check_configurations, modal_analysis, \
    modal_analysis_batch
from flexmodal_ros.robot.model import create_data, with_overrides
from flexmodal_ros.modes import ModalMap, map_modes, progress_bar
from flexmodal_ros.core.validation import finite_vector, positive

KD_RATIO = 0.425  # K_D = 0.425 √K_P, thesis Fig. 2.5
# Largest modal map built in memory (default of ``max_configurations``): a map keeps every
# configuration's modes (≈ 3 kB each for 7 joints), i.e. ≈ 0.3 GB at this size.
MAX_CONFIGURATIONS = 100_000


def check_map_size(count, max_configurations=MAX_CONFIGURATIONS, field="configurations"):
    """InputError when a map of ``count`` configurations exceeds ``max_configurations``
    (checked before anything of that size is allocated)."""
    if count > max_configurations:
        raise InputError(f"{field}: {count:.6g} configurations, more than the maximum of {max_configurations} "
                         "for one map (coarser grid, or split the map; the CLI's --max-configurations "
                         "raises the limit if the memory is there)")


def config_line(model, q_start, q_end, num: int, max_configurations=MAX_CONFIGURATIONS) -> np.ndarray:
    """``num`` ≥ 2 configurations evenly spaced from ``q_start`` to ``q_end`` (both included), (num, n).

    The thesis' 50 Scompi configurations are ``config_line(m, q1, q50, 50)``.
    """
    a = finite_vector(q_start, model.n, "q_start")
    b = finite_vector(q_end, model.n, "q_end")
    if int(num) < 2:
        raise InputError(f"num: a line needs at least 2 configurations, got {num}")
    check_map_size(int(num), max_configurations, "num")
    return np.linspace(a, b, int(num))


def config_grid(model, base_q, axes: Mapping[str, Sequence[float]],
                max_configurations=MAX_CONFIGURATIONS) -> np.ndarray:
    """Cartesian grid: joints named in ``axes`` take each listed value, the others stay at
    ``base_q``. Returns (Π len, n) in serpentine order: the first named joint varies slowest and
    the faster axes reverse direction on alternate passes, so consecutive configurations are
    always grid neighbours (needed by the mode tracking of :func:`modal_map`).
    ``grid_spec(...).rows(start, stop)`` gives any slice of it without building the rest; more
    than ``max_configurations`` rows is an InputError (checked before allocating)."""
    grid = grid_spec(model, base_q, axes)
    check_map_size(grid.size, max_configurations, "axes")
    return grid.rows()


@dataclass(frozen=True)
class ConfigGrid:
    """The grid of :func:`config_grid`, kept lazy: ``base`` (n,), the varied joint ``indices``
    and their ``values`` (first varies slowest). Small and picklable: a chunk of a 10⁷-row grid
    is generated where it is computed (:mod:`flexmodal_ros.distributed`)."""

    base: np.ndarray
    joints: tuple
    indices: tuple
    values: tuple

    @property
    def size(self) -> int:
        return math.prod(v.size for v in self.values)   # exact (numpy's product would overflow)

    def rows(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Configurations ``start``..``stop``-1 (0-based) in serpentine order, (stop − start, n)."""
        stop = self.size if stop is None else min(int(stop), self.size)
        rest = np.arange(int(start), stop, dtype=np.int64)
        digits = []
        for i, values in enumerate(self.values):
            inner = math.prod(v.size for v in self.values[i + 1:])
            digit, rest = np.divmod(rest, inner)
            digits.append(digit)
            rest = np.where(digit % 2 == 1, inner - 1 - rest, rest)  # odd pass: reversed
        grid = np.tile(self.base, (rest.size, 1))
        for j, values, digit in zip(self.indices, self.values, digits):
            grid[:, j] = values[digit]
        return grid


def grid_spec(model, base_q, axes: Mapping[str, Sequence[float]]) -> ConfigGrid:
    """Validated lazy :class:`ConfigGrid` (arguments as :func:`config_grid`)."""
    base = finite_vector(base_q, model.n, "base_q")
    if not axes:
        raise InputError("axes: at least one joint to vary is required")
    idx = tuple(model.joint_index(name) for name in axes)
    values = tuple(finite_vector(v, None, f"axes.{name}") for name, v in axes.items())
    if any(v.size == 0 for v in values):
        raise InputError("axes: every varied joint needs at least one value")
    return ConfigGrid(base, tuple(axes), idx, values)


def modal_map(model, configurations, track: bool = True, workers: int | None = None,
              progress: bool = False, max_configurations=MAX_CONFIGURATIONS) -> ModalMap:
    """Batch modal analysis over ``configurations`` (m, n) on ``workers`` local threads, optionally
    mode-tracked.

    ``progress`` shows a tqdm bar on stderr; more than ``max_configurations`` is an InputError
    (maps larger than memory: ``flexmodal_ros.distributed.sweep_to_store``; on a Dask cluster:
    :func:`flexmodal_ros.distributed.modal_map`).
    """
    qs = check_configurations(model, configurations, "configurations")
    check_map_size(len(qs), max_configurations)
    with progress_bar(len(qs), "modal map", enabled=progress) as bar:
        results = modal_analysis_batch(model, qs, workers=workers, progress=bar.update)
    return map_modes(model.joint_names, qs, results, track)


def gain_sweep(model, q, kp_values, kd_ratio: float = KD_RATIO) -> list[ModalResult]:
    """Modal parameters at configuration ``q`` for each K_P in ``kp_values`` (same on all joints)
    with K_D = kd_ratio·√K_P (thesis Fig. 2.5) [kp N·m/rad, kd N·m·s/rad]."""
    kps = positive(finite_vector(kp_values, None, "kp_values"), "kp_values")
    ratio = float(positive(kd_ratio, "kd_ratio"))
    data = create_data(model)
    return [modal_analysis(with_overrides(model, kp=kp, kd=ratio * np.sqrt(kp)), q, data)
            for kp in kps]
