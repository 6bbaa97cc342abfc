"""Linearization and modal analysis of constrained multibody systems (no rclpy).

Implements González, Masarati, Cuadrado, Naya, "Assessment of Linearization Approaches for
Multibody Dynamics Formulations" (seed 001, notes_001): systems M(q)q̈ = f(q, q̇, u) − Φ_qᵀλ,
Φ(q, t) = 0 (1) linearized about a static equilibrium by

* MCS — velocity projection, minimal coordinates (2)-(6), (16);
* RCS — redundant coordinates and multipliers, descriptor pair solved by QZ (7)-(10), (17);
* UCS — penalty formulation at its shifted equilibrium (11)-(15), (18);

with one result type (:class:`~.analysis.ConstrainedModes`, a :class:`~flexmodal_ros.modes.modeset.ModeSet`).

Modules: :mod:`.system` (the system interface and the CasADi/AD builder), :mod:`.equilibrium`
(static equilibrium with λ, pseudo-inverse at singular configurations, penalty equilibrium),
:mod:`.linearize` (the three linearizations), :mod:`.analysis` (dense QZ/eigh and sparse
shift-invert ARPACK eigenanalysis, spurious-eigenvalue classification), :mod:`.fourbar` and
:mod:`.pendulum` (the paper's models), :mod:`.models` (their bundled configs), :mod:`.robot`
(closed-chain flexible-joint robots from URDF + YAML loop closures), :mod:`.checks`
(finite-difference linearizations of the nonlinear dynamics, for verification).
"""
from .eigenanalysis import ConstrainedModes, modal_analysis
from .equilibrium import ConstraintError, Equilibrium, static_equilibrium
from .linearizations import METHODS, Penalty, SingularConfigurationError

__all__ = ["ConstrainedModes", "ConstraintError", "Equilibrium", "METHODS", "Penalty",
           "SingularConfigurationError", "modal_analysis", "static_equilibrium"]
