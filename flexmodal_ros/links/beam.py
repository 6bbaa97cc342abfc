"""Per-link beam data and cross-section helpers (di Castri & Messina 2011, §2.1 and Tables 1, 8).

A :class:`Beam` is one uniform link: length L [m], Young's modulus E [Pa], shear modulus G [Pa],
density ρ [kg/m³], area S [m²], second moment I [m⁴] about the axis normal to the plane of motion
(the in-plane bending axis), shear factor k [-], and the lumped body at its tip: mass M [kg] and
rotary inertia J [kg·m²] (the next joint's motor, or the payload for the last link).

:class:`Section` helpers take an explicit ``depth`` — the dimension lying in the plane of motion,
i.e. the bending depth — and a ``width`` normal to that plane, so that I = width·depth³/12 for a
solid rectangle. The paper's Table 8 arm bends over its 15 cm side (notes_002 §3.2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core.errors import ConfigError
from ..core.validation import finite_scalar, nonnegative, positive

BEAM_MODELS = ("timoshenko", "euler-bernoulli", "eb-inextensible")


@dataclass(frozen=True)
class Section:
    """Cross-section: area [m²], in-plane second moment [m⁴]; ``shape`` and the dimensions it was
    built from (``depth`` in-plane, ``width`` out of plane, ``wall``) or None for raw values."""

    area: float
    second_moment: float
    shape: str = "custom"
    depth: float | None = None
    width: float | None = None
    wall: float | None = None

    def thickened(self, factor: float) -> "Section":
        """The section with its in-plane depth multiplied by ``factor`` (the paper's thickening of
        Tables 2-6: S ∝ factor, I ∝ factor³ for a solid rectangle; a hollow rectangle keeps its
        wall; a custom section scales as a solid rectangle)."""
        if factor == 1.0:
            return self
        if self.shape == "rectangle":
            return rectangle(self.width, self.depth * factor)
        if self.shape == "hollow_rectangle":
            return hollow_rectangle(self.width, self.depth * factor, self.wall)
        return Section(self.area * factor, self.second_moment * factor ** 3)


def rectangle(width: float, depth: float, field: str = "section") -> Section:
    """Solid rectangle: S = width·depth, I = width·depth³/12 (bending over ``depth``) [m → m², m⁴]."""
    w, d = _positive(width, f"{field}.width"), _positive(depth, f"{field}.depth")
    return Section(w * d, w * d ** 3 / 12.0, "rectangle", d, w)


def hollow_rectangle(width: float, depth: float, wall: float, field: str = "section") -> Section:
    """Rectangular tube of outer ``width`` × ``depth`` and wall thickness ``wall`` [m]:
    S = wd − (w−2t)(d−2t), I = (w d³ − (w−2t)(d−2t)³)/12 (bending over ``depth``)."""
    w, d, t = (_positive(width, f"{field}.width"), _positive(depth, f"{field}.depth"),
               _positive(wall, f"{field}.wall"))
    if 2 * t >= min(w, d):
        raise ConfigError(f"{field}.wall: {t:g} m leaves no hole in a {w:g} x {d:g} m section "
                          f"(need 2*wall < min(width, depth))")
    wi, di = w - 2 * t, d - 2 * t
    return Section(w * d - wi * di, (w * d ** 3 - wi * di ** 3) / 12.0, "hollow_rectangle", d, w, t)


def cowper_rectangle(nu: float) -> float:
    """Cowper's (1966) shear factor of a solid rectangle, 10(1+ν)/(12+11ν)."""
    return 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu)


def shear_modulus(E: float, nu: float, field: str = "nu") -> float:
    """G = E/(2(1+ν)) for an isotropic material; ν must lie in (−1, 0.5)."""
    nu = finite_scalar(nu, field, ConfigError)
    if not -1.0 < nu < 0.5:
        raise ConfigError(f"{field}: Poisson's ratio must lie in (-1, 0.5), got {nu:g}")
    return E / (2.0 * (1.0 + nu))


@dataclass(frozen=True)
class Beam:
    """One uniform link (units in the module docstring). ``name`` is the URDF link name."""

    name: str
    length: float
    E: float
    G: float
    rho: float
    section: Section
    shear_factor: float
    tip_mass: float
    tip_inertia: float

    @property
    def S(self) -> float:
        return self.section.area

    @property
    def I(self) -> float:  # noqa: E743 (the paper's symbol)
        return self.section.second_moment

    @property
    def mass(self) -> float:
        """Distributed link mass ρSL [kg]."""
        return self.rho * self.S * self.length

    @property
    def cutoff_hz(self) -> float:
        """f_lim = √(kGS/(ρI))/2π [Hz] (§2.3): above it both Timoshenko branches oscillate."""
        omega = math.sqrt(self.shear_factor * self.G * self.S / (self.rho * self.I))
        return omega / (2 * math.pi)  # allow-pole-logic: an angular frequency in Hz, no eigenvalue

    def thickened(self, factor: float) -> "Beam":
        """Same material, tip body and length, section depth × ``factor`` (Tables 2-6)."""
        return replace(self, section=self.section.thickened(factor))


def make_beam(name, length, E, rho, section, shear_factor, tip_mass=0.0, tip_inertia=0.0,
              G=None, nu=None, field=None) -> Beam:
    """A validated :class:`Beam`; give exactly one of ``G`` [Pa] and ``nu`` [-].

    Errors (ConfigError) name ``field`` (default ``links.beams.<name>``) and the offending value:
    non-positive L, E, G, ρ, S, I, k; negative tip mass or inertia; ν outside (−1, 0.5).
    """
    field = field or f"links.beams.{name}"
    L = _positive(length, f"{field}.length")
    E = _positive(E, f"{field}.E")
    rho = _positive(rho, f"{field}.rho")
    if (G is None) == (nu is None):
        raise ConfigError(f"{field}: give exactly one of G (shear modulus) and nu (Poisson's ratio)")
    G = _positive(G, f"{field}.G") if G is not None else shear_modulus(E, nu, f"{field}.nu")
    if not isinstance(section, Section):
        raise ConfigError(f"{field}.section: expected a Section")
    _positive(section.area, f"{field}.section area S")
    _positive(section.second_moment, f"{field}.section second moment I")
    k = _positive(shear_factor, f"{field}.shear_factor")
    M = _nonnegative(tip_mass, f"{field}.tip_mass")
    J = _nonnegative(tip_inertia, f"{field}.tip_inertia")
    return Beam(str(name), L, E, G, rho, section, k, M, J)


def _positive(value, field):
    return float(positive(value, field, ConfigError))


def _nonnegative(value, field):
    return float(nonnegative(value, field, ConfigError))
