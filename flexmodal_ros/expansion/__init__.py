"""Eigenpairs as polynomials of the configuration (Palomba & Vidoni 2019, notes_000 §3).

- :mod:`.multiindex` — multi-indices, total-degree truncation, addend counts (eq. (19), Table 1);
- :mod:`.taylor` — exact Taylor coefficients of symbolic (CasADi) matrix functions (eq. (20));
- :mod:`.eigen` — first-order form (16), right/left eigenvectors biorthonormalized (17)-(18),
  :class:`~.eigen.BiorthogonalModes` (a ModeSet with left vectors);
- :mod:`.recursion` — the recursion (21)-(29) per selected eigenpair (:func:`~.recursion.expand`);
- :mod:`.polynomial` — its result :class:`~.polynomial.ModalPolynomial` (vectorized evaluation
  x → λ, φ, ψ, f, ζ with error estimate and trust radius; .npz save/load);
- :mod:`.flexible_joint` — static expansion x = q of the closed-loop flexible-joint AMA (thesis ch. 2);
- :mod:`.live` — the modal server's polynomial fast path (re-expansion outside the trust radius).

The flexible-link (ERLS) arm of the paper lives in :mod:`flexmodal_ros.expansion.erls`.
"""
from .eigen import BiorthogonalModes, Eigenpairs, eigenpairs, eigenpairs_batch, first_order_form
from .polynomial import ModalPolynomial, PolynomialEigenpairs, PolynomialModes, TrustRegionWarning
from .recursion import ExpansionWarning, expand
from .flexible_joint import FlexibleJointSystem
from .multiindex import MultiIndexSet, addend_count, multi_index_set, table1

__all__ = ["BiorthogonalModes", "Eigenpairs", "eigenpairs", "eigenpairs_batch", "first_order_form",
           "ExpansionWarning", "ModalPolynomial", "PolynomialEigenpairs", "PolynomialModes",
           "TrustRegionWarning", "expand", "FlexibleJointSystem", "MultiIndexSet", "addend_count",
           "multi_index_set", "table1"]
