"""Bundled paper models (``config/constrained/*.yaml``): the four-bar and the flexible pendulum.

:func:`load_paper_model` reads a model file (a bundled name — ``fourbar``, ``fourbar_singular``,
``pendulum`` — or a path), applies overrides (e.g. ``loops=20``, ``damping=1.0``,
``elements=50``) and returns a :class:`PaperModel`: the compiled system, the initial guess of
its static equilibrium and the penalty parameters the source used for UCS. Every key of the file
is required and unknown keys are errors (nothing is silently defaulted).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ConfigError, FlexmodalError
from ..core.validation import finite_scalar, finite_vector, load_yaml_mapping, reject_unknown_keys
from .fourbar import FourBarParameters, fourbar_guess, fourbar_system
from .linearizations import Penalty
from .pendulum import PendulumParameters, pendulum_guess, pendulum_system

_KINDS = {
    "fourbar": (FourBarParameters, "initial_angle", 1),
    "pendulum": (PendulumParameters, "initial_angles", 2),
}


@dataclass(frozen=True)
class PaperModel:
    """``name``; ``parameters`` (:class:`~.fourbar.FourBarParameters` or
    :class:`~.pendulum.PendulumParameters`); ``system``; ``guess`` (n,) initial guess of the
    equilibrium; ``penalty`` the UCS parameters of the file."""

    name: str
    parameters: object
    system: object
    guess: np.ndarray
    penalty: Penalty


def model_path(name_or_path) -> Path:
    """Path of a bundled model name or of a given YAML file."""
    from ..robot.registry import share_dir

    path = Path(str(name_or_path))
    if path.suffix in (".yaml", ".yml"):
        return path
    bundled = share_dir() / "config" / "constrained"
    candidate = bundled / f"{name_or_path}.yaml"
    if not candidate.is_file():
        names = sorted(p.stem for p in bundled.glob("*.yaml"))
        raise ConfigError(f"model: unknown model '{name_or_path}' (bundled: {', '.join(names)}; "
                          "or give a .yaml file)")
    return candidate


def load_paper_model(name_or_path, **overrides) -> PaperModel:
    """The :class:`PaperModel` of a model file with ``overrides`` of its parameters."""
    path = model_path(name_or_path)
    raw = load_yaml_mapping(path, "model file", ConfigError)
    kind = raw.get("model")
    if kind not in _KINDS:
        raise ConfigError(f"model: expected one of {', '.join(_KINDS)} in {path}, got {kind!r}")
    cls, guess_key, guess_size = _KINDS[kind]
    fields = [f.name for f in dataclasses.fields(cls)]
    allowed = set(fields) | {"model", guess_key, "penalty"}
    reject_unknown_keys(raw, allowed, str(path), ConfigError)
    missing = sorted(allowed - set(raw))
    if missing:
        raise ConfigError(f"{path}: missing key(s) {', '.join(missing)}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ConfigError(f"{kind}: cannot override {', '.join(unknown)} (parameters: {', '.join(fields)})")
    values = {k: raw[k] for k in fields}
    values.update(overrides)
    if "gravity" in values:
        values["gravity"] = tuple(finite_vector(values["gravity"], 2, "gravity", ConfigError))
    try:
        params = cls(**values)
        penalty = _penalty(raw["penalty"], path)
    except FlexmodalError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    guess_values = finite_vector(np.atleast_1d(raw[guess_key]), guess_size, guess_key, ConfigError)
    if kind == "fourbar":
        return PaperModel(path.stem, params, fourbar_system(params),
                          fourbar_guess(params, guess_values[0]), penalty)
    return PaperModel(path.stem, params, pendulum_system(params),
                      pendulum_guess(params, *guess_values), penalty)


def _penalty(spec, path) -> Penalty:
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: penalty: expected a mapping with alpha, xi, omega")
    reject_unknown_keys(spec, {"alpha", "xi", "omega"}, "penalty", ConfigError)
    missing = sorted({"alpha", "xi", "omega"} - set(spec))
    if missing:
        raise ConfigError(f"{path}: penalty: missing {', '.join(missing)}")
    return Penalty(*(finite_scalar(spec[k], f"penalty.{k}", ConfigError) for k in ("alpha", "xi", "omega")))
