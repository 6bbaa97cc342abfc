"""Planar flexible-link arms in the ERLS formulation (Palomba & Vidoni 2019, notes_000 §1-§2, §4).

- :mod:`.model` — n-link ERLS arm with two-node six-DOF Euler–Bernoulli elements: M, C, K, f of
  eq. (1) in the (A1) order [q_f; q_r] as CasADi expressions (exact derivatives of any order),
  the bundled 23-DOF arm of the paper (``config/erls_2link.yaml``);
- :mod:`.linearize` — operating points (dynamic equilibria), linearization (4)-(11) with the
  corrected signs, and :class:`~.linearize.ErlsSystem`, the parametric view for
  :func:`flexmodal_ros.expansion.expand`;
- :mod:`.paper` — the paper's validation task (§4, Figs. 3-5): straight end-effector path, exact
  re-linearization vs polynomial eigenpairs, ε_f, ε_ξ, MAC of right and left vectors, timing.
"""
from .erls_linearization import ErlsSystem, OperatingPoint, linearize, linearize_batch, operating_point
from .erls_model import ErlsModel, load_erls, make_model

__all__ = ["ErlsSystem", "OperatingPoint", "linearize", "linearize_batch", "operating_point",
           "ErlsModel", "load_erls", "make_model"]
