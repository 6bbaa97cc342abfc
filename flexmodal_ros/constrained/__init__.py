"""Linearization and modal analysis of constrained multibody systems (no rclpy).

Implements González, Masarati, Cuadrado, Naya, "Assessment of Linearization Approaches for
Multibody Dynamics Formulations" (seed 001, notes_001): systems M(q)q̈ = f(q, q̇, u) − Φ_qᵀλ,
Φ(q, t) = 0 (1) linearized about a static equilibrium by

* MCS — velocity projection, minimal coordinates (2)-(6), (16);
* RCS — redundant coordinates and multipliers, descriptor pair solved by QZ (7)-(10), (17);
* UCS — penalty formulation at its shifted equilibrium (11)-(15), (18);

with one result type (:class:`~.eigenanalysis.ConstrainedModes`, a :class:`~flexmodal_ros.modes.modeset.ModeSet`).

Modules: :mod:`.system` (the system interface and the CasADi/AD builder), :mod:`.equilibrium`
(static equilibrium with λ, pseudo-inverse at singular configurations, penalty equilibrium),
:mod:`.linearizations` (the three linearizations), :mod:`.eigenanalysis` (the modes of each
method, spurious-eigenvalue classification) with :mod:`.pencils` (dense QZ/dgeev/eigh and sparse
shift-invert ARPACK eigensolvers) and :mod:`.refinement` (error bounds, inverse iteration), :mod:`.fourbar` and
:mod:`.pendulum` (the paper's models), :mod:`.paper_models` (their bundled configs),
:mod:`.closed_chain` (closed-chain flexible-joint robots from URDF + YAML loop closures),
:mod:`.closed_chain_analysis` (their set-points and modes), :mod:`.checks` (finite-difference
linearizations of the nonlinear dynamics, for verification).
"""
from ..core.lazy import lazy_exports

# Exports imported on first use: a node that only loads a closed-chain robot
# (constrained.closed_chain) does not pay for the eigenanalysis (SciPy sparse, ARPACK).
__getattr__, __all__ = lazy_exports(__name__, {
    "eigenanalysis": ("ConstrainedModes", "modal_analysis"),
    "equilibrium": ("ConstraintError", "Equilibrium", "static_equilibrium"),
    "linearizations": ("METHODS", "Penalty", "SingularConfigurationError"),
})
