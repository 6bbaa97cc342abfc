"""Polynomial fast path of the live modal parameters (modal analysis server, ``modal_method``
``polynomial``): the flexible-joint closed loop expanded about the current configuration
(:mod:`.flexible_joint`), evaluated while the robot stays inside the trust region, re-expanded
about the current configuration when it leaves it.

Policy per configuration q: evaluate the current expansion if ‖q − q0‖∞ ≤ trust radius and its
error estimate (degree-t terms over |λ|, every mode) ≤ ``tolerance``; otherwise expand about q
(where the result is exact) and use that. A configuration whose selected eigenvalues are
repeated cannot be expanded: the exact AMA is returned for it and the next configuration tries
again. Results are :class:`~flexmodal_ros.flexible_joint.ama.ModalResult` objects like the exact path's.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.linear_model import equilibrium_from_compensation
from ..flexible_joint.ama import ModalResult, check_configurations, modal_analysis
from ..robot.model import create_data, gravity_torque, wrench_torque
from .polynomial import ModalPolynomial
from .recursion import ExpansionWarning, expand
from .multiindex import check_expansion_size
from .flexible_joint import FlexibleJointSystem, taylor_maps


# Relative eigenvalue error estimate that triggers a re-expansion: along the thesis LWR4 trajectory
# the actual errors stay below 1e-4 in f and 1e-3 pp in ζ with it (test_expand_node.py), well inside
# the 0.5 % / 0.5 pp the live topic promises; 1e-2 gave 0.3-0.6 %.
LIVE_TOLERANCE = 2e-3


@dataclass(frozen=True)
class LiveStep:
    """How one configuration was answered: ``source`` "polynomial", "expanded" (re-expanded about
    it) or "exact" (fallback); ``error_estimate`` max relative eigenvalue error estimate;
    ``distance`` ‖q − q0‖∞ [rad or m]; ``seconds`` wall time."""

    source: str
    error_estimate: float
    distance: float
    seconds: float


class PolynomialModalTracker:
    """Live modal parameters of ``model`` from polynomial eigenpairs of order ``order``.

    ``tolerance``: relative eigenvalue error estimate that triggers a re-expansion (and defines
    the trust radius), None = :data:`LIVE_TOLERANCE`; ``trust_radius``: fixed radius [rad or m, max-norm] or None for the one
    computed from ``tolerance`` at each expansion. ``expansions`` counts the expansions made,
    ``counts`` the configurations answered by each source ("polynomial", "expanded", "exact").
    """

    def __init__(self, model, order: int = 3, tolerance: float | None = None, trust_radius=None,
                 order_field: str = "expansion_order"):
        if trust_radius is not None and not trust_radius > 0:
            raise InputError(f"trust_radius: must be > 0 (or None for automatic), got {trust_radius}")
        self.system = FlexibleJointSystem(model)
        self.model, self.order = model, check_expansion_size(self.system, order, order_field)
        self.tolerance = LIVE_TOLERANCE if tolerance is None else float(tolerance)
        self.fixed_radius = None if trust_radius is None else float(trust_radius)
        self.data = create_data(model)
        self.polynomial: ModalPolynomial | None = None
        self.expansions = 0
        self.counts = {"polynomial": 0, "expanded": 0, "exact": 0}
        self.last_step: LiveStep | None = None

    def warm_up(self):
        """Build the symbolic Taylor functions now (the costly part: ``benchmarks/bench_expansion.py``)
        instead of at the first configuration."""
        taylor_maps(self.model, self.order)

    @property
    def radius(self) -> float:
        if self.polynomial is None:
            return 0.0
        return self.fixed_radius if self.fixed_radius is not None else self.polynomial.trust_radius

    def install(self, polynomial: ModalPolynomial):
        """Use an expansion made elsewhere (e.g. by the ``~/expand_modal_parameters`` service)."""
        if polynomial.metadata.get("system") != "flexible_joint" or \
                tuple(polynomial.parameter_names) != self.model.joint_names:
            raise InputError("polynomial: not an expansion of this robot's closed loop")
        self.polynomial = polynomial

    def expand_about(self, q) -> ModalPolynomial:
        """Expand all modes about ``q`` (right vectors only) and make it the current expansion."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExpansionWarning)
            poly = expand(self.system, q, self.order, left=False, tolerance=self.tolerance)
        self.polynomial = poly
        self.expansions += 1
        return poly

    def __call__(self, q) -> ModalResult:
        """ModalResult at configuration ``q`` (n,), URDF order (see the module docstring)."""
        start = time.perf_counter()
        q = check_configurations(self.model, q, "q")[0]
        source, estimate, distance = "polynomial", 0.0, 0.0
        modes = None
        if self.polynomial is not None:
            distance = float(self.polynomial.distance(q)[0])
            if distance <= self.radius:
                modes = self.polynomial.mode_sets(q, left=False, warn=False)[0]
                estimate = float(modes.error_estimate.max(initial=0.0))
                if estimate > self.tolerance:
                    modes = None
        if modes is None:
            try:
                self.expand_about(q)
                modes = self.polynomial.mode_sets(q, left=False, warn=False)[0]
                source, estimate, distance = "expanded", 0.0, 0.0
            except InputError:
                result = modal_analysis(self.model, q, self.data)
                self._record(LiveStep("exact", 0.0, distance, time.perf_counter() - start))
                return result
        result = ModalResult(**modes.mode_fields(), q=q, motor_equilibrium=self._motor_equilibrium(q))
        self._record(LiveStep(source, estimate, distance, time.perf_counter() - start))
        return result

    def _record(self, step: LiveStep):
        self.last_step = step
        self.counts[step.source] += 1

    def _motor_equilibrium(self, q) -> np.ndarray:
        """q_m^d (2.3), exact (Pinocchio gravity and wrench torque)."""
        comp = gravity_torque(self.model, self.data, q)
        if np.any(self.model.wrench):
            comp = comp - wrench_torque(self.model, self.data, q)
        return equilibrium_from_compensation(self.model, q, comp)
