"""Planar n-link flexible arm in the Equivalent Rigid Link System (ERLS) formulation.

Palomba & Vidoni (2019) eq. (1) and App. A.1 (notes_000 §1): M(q_r) q̈ + C(q_r, q̇_r) q̇ + K(q_r) q
= f(q_r, u) with q = [q_f; q_r] (A1). Link i (absolute angle q_i from the x axis, length L_i) is
meshed with ``elements`` two-node six-DOF Euler–Bernoulli beams of length l_i = L_i / n_e,i.

Coordinates. Node j of link i has ERLS pose (r_ij, q_i) with r_ij = Σ_{k<i} L_k e(q_k) + j l_i e(q_i),
e(θ) = (cos θ, sin θ), and absolute pose (r_ij, q_i) + u_ij, u_ij = (x, y, θ) elastic displacements in
the global frame. The ERLS is fixed by zeroing as many nodal displacements as rigid coordinates:
the base node of link 1 is pinned (x = y = 0) with zero elastic rotation, and link i > 1 has zero
elastic rotation at its first node, whose (x, y) are those of link i−1's last node. The elastic
coordinates q_f are, link by link, the (x, y, θ) of nodes 1…n_e,i (21 for the paper's 4 + 3 mesh).

Energies. With V = P q̇_f + S(q_r) q̇_r the nodal velocities (P constant selection, S = ∂(ERLS
poses)/∂q_r), T = ½ Vᵀ M_n(q_r) V and U = ½ q_fᵀ Pᵀ K_n(q_r) P q_f, where M_n, K_n assemble the
consistent element matrices rotated by q_i (plus lumped hub/payload masses). Hence
M = [P S]ᵀ M_n [P S] (M11 rotated consistent mass, M21 = Sᵀ M_n P, M22 = Sᵀ M_n S the exact rigid
inertia) and K = blkdiag(Pᵀ K_n P, 0) (A3)-(A4); K_n S = 0 since the ERLS moves each element
rigidly. Gravity enters through consistent nodal loads (A2); joint torque u_i acts on link i's first
node rotation and, as a reaction, on link i−1's last node rotation.

C (A5). C q̇ = Ṁ q̇ − ∂T/∂q_r with the ERLS truncation of ∂T/∂q_r to terms at most linear in q̇_f
(the term ½ q̇_fᵀ ∂M11/∂q_r q̇_f is second order in the small elastic velocities, and it vanishes
with its first derivatives at q̇_f = 0): C = Ṁ − N with N non-zero only in the rigid rows,
N_i = [q̇_rᵀ ∂M21/∂q_i, ½ q̇_rᵀ ∂M22/∂q_i], so C depends on (q_r, q̇_r) only and its elastic rows are
Ṁ (the printed C11 = Ṁ11, C12 = Ṁ12). The rigid-rigid block differs from the printed one as a
matrix but gives the same product C22 q̇_r = [c13 q̇2², −c13 q̇1²] (notes_000: the printed (2,1)
sign is lost); only the product C q̇ enters (2)-(5). Rayleigh damping α M_n + β K_n acts on the
elastic velocities: + [α M11 + β K11, 0; α M21, 0] (A5).

Pinocchio style: :class:`ErlsModel` is immutable; the functions ``f(model, q_r, ...)`` evaluate
CasADi functions built once per model (:func:`symbolic`), which also give the exact derivatives of
any order that the linearization and the parametric expansion need. Units: SI (m, kg, N, rad).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import casadi as ca
import numpy as np

from ...core.errors import ConfigError, InputError
from ...core.validation import finite_vector, load_yaml_mapping, nonnegative, positive, reject_unknown_keys, shown

TOP_KEYS = {"model", "name", "gravity", "rayleigh", "payload", "links"}
LINK_KEYS = {"length", "elements", "youngs_modulus", "area", "second_moment", "mass_per_length",
             "hub_mass", "hub_inertia"}


@dataclass(frozen=True)
class ErlsLink:
    """One flexible link: length L [m], ``elements`` (≥ 1), Young's modulus E [Pa], cross-section
    area A [m²], second moment of area J [m⁴] (bending in the plane of motion), mass per length
    ρ_l [kg/m], hub (motor) point mass [kg] and rotary inertia [kg m²] at its first node."""

    length: float
    elements: int
    youngs_modulus: float
    area: float
    second_moment: float
    mass_per_length: float
    hub_mass: float = 0.0
    hub_inertia: float = 0.0

    @property
    def element_length(self) -> float:
        return self.length / self.elements


@dataclass(frozen=True, eq=False)
class ErlsModel:
    """Immutable planar ERLS arm: ``links``; ``gravity`` (2,) [m/s²]; Rayleigh ``alpha`` [1/s] and
    ``beta`` [s]; tip ``payload_mass`` [kg] and ``payload_inertia`` [kg m²]; ``name``; ``path``."""

    name: str
    links: tuple
    gravity: np.ndarray
    alpha: float
    beta: float
    payload_mass: float = 0.0
    payload_inertia: float = 0.0
    path: Path | None = None
    _functions: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_r(self) -> int:
        """Rigid coordinates (one absolute angle per link)."""
        return len(self.links)

    @property
    def n_f(self) -> int:
        """Elastic coordinates: 3 per node except each link's first node."""
        return 3 * sum(link.elements for link in self.links)

    @property
    def n(self) -> int:
        return self.n_f + self.n_r

    @property
    def rigid_names(self) -> tuple:
        return tuple(f"q_{i + 1}" for i in range(self.n_r))

    @property
    def coordinate_names(self) -> tuple:
        """Names of q = [q_f; q_r] (A1): ``q_f_1`` … then ``q_1`` …"""
        return tuple(f"q_f_{i + 1}" for i in range(self.n_f)) + self.rigid_names


def make_model(links, gravity=(0.0, -9.81), alpha=0.0, beta=0.0, payload_mass=0.0,
               payload_inertia=0.0, name="erls_arm", path=None, error=InputError) -> ErlsModel:
    """Validated :class:`ErlsModel` from link mappings (keys of :class:`ErlsLink`) or ErlsLink objects."""
    if not links:
        raise error("links: at least one link is required")
    built = []
    for i, link in enumerate(links):
        built.append(link if isinstance(link, ErlsLink) else _link(link, f"links[{i}]", error))
    return ErlsModel(
        name=str(name), links=tuple(built), gravity=finite_vector(gravity, 2, "gravity", error),
        alpha=float(nonnegative(alpha, "rayleigh.alpha", error)),
        beta=float(nonnegative(beta, "rayleigh.beta", error)),
        payload_mass=float(nonnegative(payload_mass, "payload.mass", error)),
        payload_inertia=float(nonnegative(payload_inertia, "payload.inertia", error)), path=path)


def _link(raw, field_name, error) -> ErlsLink:
    if not isinstance(raw, dict):
        raise error(f"{field_name}: expected a mapping of link properties")
    reject_unknown_keys(raw, LINK_KEYS, field_name, error)
    required = LINK_KEYS - {"hub_mass", "hub_inertia"}
    missing = sorted(required - set(raw))
    if missing:
        raise error(f"{field_name}: missing {', '.join(missing)}")
    elements = raw["elements"]
    if not isinstance(elements, int) or isinstance(elements, bool) or elements < 1:
        raise error(f"{field_name}.elements: must be an integer >= 1, got {shown(elements)}")
    values = {k: float(positive(raw[k], f"{field_name}.{k}", error))
              for k in ("length", "youngs_modulus", "area", "second_moment", "mass_per_length")}
    hubs = {k: float(nonnegative(raw.get(k, 0.0), f"{field_name}.{k}", error)) for k in ("hub_mass", "hub_inertia")}
    return ErlsLink(elements=elements, **values, **hubs)


def is_erls_file(path) -> bool:
    """True if the YAML file declares ``model: erls`` (a flexible-link arm, not a flexible-joint robot)."""
    try:
        return load_yaml_mapping(path, "params", ConfigError).get("model") == "erls"
    except ConfigError:
        return False


def bundled_erls(name: str) -> ErlsModel | None:
    """The bundled flexible-link arm ``config/<name>.yaml`` (``model: erls``), or None if there is none."""
    # deferred: Pinocchio (through robot.registry)
    from ...robot.registry import share_dir

    if not re.fullmatch(r"[A-Za-z0-9_\-]+", str(name)):
        return None
    path = share_dir() / "config" / f"{name}.yaml"
    return load_erls(path) if path.is_file() and is_erls_file(path) else None


def load_erls(path) -> ErlsModel:
    """ErlsModel from a YAML file (format: ``config/erls_2link.yaml``); ConfigError naming the field."""
    path = Path(path)
    raw = load_yaml_mapping(path, "erls model", ConfigError)
    reject_unknown_keys(raw, TOP_KEYS, f"erls model {path}", ConfigError)
    if raw.get("model") != "erls":
        raise ConfigError(f"{path}: model: expected 'erls', got {shown(raw.get('model'))}")
    rayleigh = raw.get("rayleigh", {}) or {}
    payload = raw.get("payload", {}) or {}
    for key, value, allowed in (("rayleigh", rayleigh, {"alpha", "beta"}), ("payload", payload, {"mass", "inertia"})):
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {key}: expected a mapping")
        reject_unknown_keys(value, allowed, key, ConfigError)
    if not isinstance(raw.get("links"), list):
        raise ConfigError(f"{path}: links: expected a list of link mappings")
    if "gravity" not in raw:
        raise ConfigError(f"{path}: gravity: missing (give [gx, gy] in m/s^2 explicitly)")
    return make_model(raw["links"], raw["gravity"], rayleigh.get("alpha", 0.0), rayleigh.get("beta", 0.0),
                      payload.get("mass", 0.0), payload.get("inertia", 0.0), raw.get("name", path.stem),
                      path, ConfigError)


# --------------------------------------------------------------------------- element matrices
def element_mass(rho_l: float, l: float) -> np.ndarray:
    """Consistent mass of a two-node Euler–Bernoulli beam in local (u1, v1, θ1, u2, v2, θ2):
    axial ρl/6 [[2, 1], [1, 2]], bending ρl/420 [[156, 22l, 54, −13l], …] (no rotary inertia)."""
    m = np.zeros((6, 6))
    ax, bd = [0, 3], [1, 2, 4, 5]
    m[np.ix_(ax, ax)] = rho_l * l / 6.0 * np.array([[2.0, 1.0], [1.0, 2.0]])
    m[np.ix_(bd, bd)] = rho_l * l / 420.0 * np.array([
        [156.0, 22 * l, 54.0, -13 * l], [22 * l, 4 * l * l, 13 * l, -3 * l * l],
        [54.0, 13 * l, 156.0, -22 * l], [-13 * l, -3 * l * l, -22 * l, 4 * l * l]])
    return m


def element_stiffness(E: float, A: float, J: float, l: float) -> np.ndarray:
    """Euler–Bernoulli beam stiffness in local (u1, v1, θ1, u2, v2, θ2): axial EA/l, bending EJ/l³
    [[12, 6l, −12, 6l], [6l, 4l², −6l, 2l²], …]."""
    k = np.zeros((6, 6))
    ax, bd = [0, 3], [1, 2, 4, 5]
    k[np.ix_(ax, ax)] = E * A / l * np.array([[1.0, -1.0], [-1.0, 1.0]])
    k[np.ix_(bd, bd)] = E * J / l ** 3 * np.array([
        [12.0, 6 * l, -12.0, 6 * l], [6 * l, 4 * l * l, -6 * l, 2 * l * l],
        [-12.0, -6 * l, 12.0, -6 * l], [6 * l, 2 * l * l, -6 * l, 4 * l * l]])
    return k


def _rotation(c, s):
    """Nodal rotation blkdiag(R, 1, R, 1) (global = T · local) as a 6×6 SX matrix."""
    T = ca.SX.zeros(6, 6)
    for o in (0, 3):
        T[o, o], T[o, o + 1], T[o + 1, o], T[o + 1, o + 1], T[o + 2, o + 2] = c, -s, s, c, 1
    return T


# --------------------------------------------------------------------------- symbolic model
@dataclass(frozen=True)
class ErlsSymbols:
    """SX expressions of one model: symbols ``q_r``, ``qd_r``, ``u``, ``payload`` (tip mass) and
    ``M``, ``K``, ``C`` (velocity terms + Rayleigh), ``f`` (A2), ``F_u`` = ∂f/∂u, nodal ``M_n``,
    ``K_n``, ``S`` (ERLS Jacobian of the nodal poses), ``P`` (constant, numpy)."""

    q_r: ca.SX
    qd_r: ca.SX
    u: ca.SX
    payload: ca.SX
    M: ca.SX
    K: ca.SX
    C: ca.SX
    f: ca.SX
    F_u: np.ndarray
    M_n: ca.SX
    K_n: ca.SX
    S: ca.SX
    P: np.ndarray


def nodal_layout(model: ErlsModel):
    """Nodes (link i, node j) in nodal order, and for each nodal DOF (3 per node: x, y, θ) the
    elastic coordinate it equals (−1: none, i.e. zero). Returns (nodes, elastic_index (3·nodes,))."""
    nodes, index, count, last_xy = [], [], 0, None
    for i, link in enumerate(model.links):
        for j in range(link.elements + 1):
            nodes.append((i, j))
            if j == 0:
                xy = last_xy if i > 0 else (-1, -1)
                index += [xy[0], xy[1], -1]
            else:
                index += [count, count + 1, count + 2]
                last_xy = (count, count + 1)
                count += 3
    return nodes, np.array(index)


def symbolic(model: ErlsModel) -> ErlsSymbols:
    """Build (once per model) the symbolic ERLS matrices described in the module docstring."""
    cached = model._functions.get("symbols")
    if cached is not None:
        return cached
    nr, nf = model.n_r, model.n_f
    q_r, qd_r, u = ca.SX.sym("q_r", nr), ca.SX.sym("qd_r", nr), ca.SX.sym("u", nr)
    payload = ca.SX.sym("payload_mass")
    nodes, elastic = nodal_layout(model)
    nn = 3 * len(nodes)
    P = np.zeros((nn, nf))
    rows = np.flatnonzero(elastic >= 0)
    P[rows, elastic[rows]] = 1.0
    start = {}
    pose, origin = [], ca.SX.zeros(2, 1)
    for i, link in enumerate(model.links):
        e = ca.vertcat(ca.cos(q_r[i]), ca.sin(q_r[i]))
        for j in range(link.elements + 1):
            start.setdefault(i, len(pose) // 3)
            pose += [*ca.vertsplit(origin + j * link.element_length * e), q_r[i]]
        origin = origin + link.length * e
    pose = ca.vertcat(*pose)
    S = ca.jacobian(pose, q_r)
    M_n, K_n = ca.SX.zeros(nn, nn), ca.SX.zeros(nn, nn)
    F_n = ca.SX.zeros(nn, 1)
    g = model.gravity
    for i, link in enumerate(model.links):
        c, s = ca.cos(q_r[i]), ca.sin(q_r[i])
        T = _rotation(c, s)
        l, rho = link.element_length, link.mass_per_length
        me = ca.mtimes([T, ca.SX(element_mass(rho, l)), T.T])
        ke = ca.mtimes([T, ca.SX(element_stiffness(link.youngs_modulus, link.area, link.second_moment, l)), T.T])
        # consistent load of the distributed weight ρ_l g: transverse component w = ρ_l g·(−s, c)
        w = rho * (-g[0] * s + g[1] * c)
        fe = ca.vertcat(rho * l * g[0] / 2, rho * l * g[1] / 2, w * l * l / 12,
                        rho * l * g[0] / 2, rho * l * g[1] / 2, -w * l * l / 12)
        for k in range(link.elements):
            dofs = [3 * (start[i] + k) + d for d in range(6)]
            for a in range(6):
                F_n[dofs[a]] += fe[a]
                for b in range(6):
                    M_n[dofs[a], dofs[b]] += me[a, b]
                    K_n[dofs[a], dofs[b]] += ke[a, b]
        hub = 3 * start[i]
        M_n[hub, hub] += link.hub_mass
        M_n[hub + 1, hub + 1] += link.hub_mass
        M_n[hub + 2, hub + 2] += link.hub_inertia
        F_n[hub] += link.hub_mass * g[0]
        F_n[hub + 1] += link.hub_mass * g[1]
    tip = nn - 3
    M_n[tip, tip] += payload
    M_n[tip + 1, tip + 1] += payload
    M_n[tip + 2, tip + 2] += model.payload_inertia
    F_n[tip] += payload * g[0]
    F_n[tip + 1] += payload * g[1]

    G = ca.horzcat(ca.SX(P), S)
    M = ca.mtimes([G.T, M_n, G])
    K11 = ca.mtimes([P.T, K_n, P])
    K = ca.diagcat(K11, ca.SX.zeros(nr, nr))
    F_u = _torque_map(model, start, P)
    f = ca.mtimes(G.T, F_n) + ca.mtimes(ca.SX(F_u), u)
    C = _velocity_matrix(M, q_r, qd_r, nf) + model.alpha * ca.horzcat(M[:, :nf], ca.SX.zeros(nf + nr, nr)) \
        + model.beta * K
    symbols = ErlsSymbols(q_r, qd_r, u, payload, M, K, C, f, F_u, M_n, K_n, S, P)
    model._functions["symbols"] = symbols
    return symbols


def _torque_map(model, start, P) -> np.ndarray:
    """∂f/∂u (n × n_r): u_i on q_i, reaction −u_i on q_{i−1} and on link i−1's last-node rotation."""
    nf, nr = model.n_f, model.n_r
    F = np.zeros((nf + nr, nr))
    for i in range(nr):
        F[nf + i, i] = 1.0
        if i > 0:
            F[nf + i - 1, i] = -1.0
            end_rotation = 3 * (start[i] - 1) + 2          # last node of link i−1
            F[:nf, i] -= P[end_rotation]
    return F


def _velocity_matrix(M, q_r, qd_r, nf):
    """C = Ṁ − N of the module docstring (velocity-dependent part, linear in q̇_r)."""
    nr = q_r.numel()
    Mdot = ca.reshape(ca.jacobian(ca.vec(M), q_r) @ qd_r, M.shape[0], M.shape[1])
    N = ca.SX.zeros(M.shape)
    for i in range(nr):
        dM = ca.reshape(ca.jacobian(ca.vec(M), q_r[i]), M.shape[0], M.shape[1])
        N[nf + i, :nf] = ca.mtimes(qd_r.T, dM[nf:, :nf])
        N[nf + i, nf:] = 0.5 * ca.mtimes(qd_r.T, dM[nf:, nf:])
    return Mdot - N


# --------------------------------------------------------------------------- numeric evaluation
def _function(model: ErlsModel, name: str):
    """Cached CasADi function ``name`` of (q_r, qd_r, u, payload_mass)."""
    fn = model._functions.get(name)
    if fn is None:
        sym = symbolic(model)
        expr = {"M": sym.M, "K": sym.K, "C": sym.C, "f": sym.f, "M_n": sym.M_n, "K_n": sym.K_n,
                "S": sym.S}[name]
        fn = ca.Function(name, [sym.q_r, sym.qd_r, sym.u, sym.payload], [expr])
        model._functions[name] = fn
    return fn


def _eval(model, name, q_r, qd_r=None, u=None, payload_mass=None):
    nr = model.n_r
    q_r = finite_vector(q_r, nr, "q_r")
    qd_r = np.zeros(nr) if qd_r is None else finite_vector(qd_r, nr, "qd_r")
    u = np.zeros(nr) if u is None else finite_vector(u, nr, "u")
    mp = model.payload_mass if payload_mass is None else float(nonnegative(payload_mass, "payload_mass"))
    return np.array(_function(model, name)(q_r, qd_r, u, mp))


def mass_matrix(model, q_r, payload_mass=None) -> np.ndarray:
    """M(q_r) (n × n) (A4) [kg, kg m, kg m²]."""
    return _eval(model, "M", q_r, payload_mass=payload_mass)


def stiffness_matrix(model, q_r) -> np.ndarray:
    """K(q_r) = blkdiag(K11, 0) (A3) [N/m, N, N m]."""
    return _eval(model, "K", q_r)


def damping_matrix(model, q_r, qd_r, payload_mass=None) -> np.ndarray:
    """C(q_r, q̇_r) (A5): velocity terms + Rayleigh damping on the elastic velocities."""
    return _eval(model, "C", q_r, qd_r, payload_mass=payload_mass)


def force_vector(model, q_r, u, payload_mass=None) -> np.ndarray:
    """f(q_r, u) (A2): consistent gravity loads and joint torques u [N m] → (n,)."""
    return _eval(model, "f", q_r, u=u, payload_mass=payload_mass).ravel()


def torque_matrix(model) -> np.ndarray:
    """F̄ = ∂f/∂u (7), constant (n × n_r)."""
    return symbolic(model).F_u.copy()


def nodal_matrices(model, q_r, payload_mass=None):
    """(M_n, K_n, S): assembled nodal mass and stiffness (all 3 DOF of every node, before the ERLS
    constraints) and the ERLS Jacobian S = ∂(nodal ERLS poses)/∂q_r, at q_r."""
    return (_eval(model, "M_n", q_r, payload_mass=payload_mass), _eval(model, "K_n", q_r),
            _eval(model, "S", q_r))


def residual(model, q, qd, qdd, u, payload_mass=None) -> np.ndarray:
    """Γ = M q̈ + C q̇ + K q − f (2) for full q, q̇, q̈ (n,) and u (n_r,)."""
    n, nf = model.n, model.n_f
    q, qd, qdd = (finite_vector(v, n, name) for v, name in ((q, "q"), (qd, "qd"), (qdd, "qdd")))
    q_r, qd_r = q[nf:], qd[nf:]
    return (mass_matrix(model, q_r, payload_mass) @ qdd + damping_matrix(model, q_r, qd_r, payload_mass) @ qd
            + stiffness_matrix(model, q_r) @ q - force_vector(model, q_r, u, payload_mass))
