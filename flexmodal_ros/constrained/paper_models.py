"""Bundled paper models (``config/constrained/*.yaml``): the four-bar and the flexible pendulum.

:func:`load_paper_model` reads a model file (a bundled name — ``fourbar``, ``fourbar_singular``,
``pendulum`` — or a path), applies overrides (e.g. ``loops=20``, ``damping=1.0``,
``elements=50``) and returns a :class:`PaperModel`: the compiled system, the initial guess of
its static equilibrium and the penalty parameters the source used for UCS. Every key of the file
is required and unknown keys are errors (nothing is silently defaulted).

Size: a model may have at most ``MAX_COORDINATES`` coordinates (four-bar n = 2N + 3, pendulum
n = 6 n_p + 12), checked before the system is built (the sparse path then needs ~40 MB per 1000
coordinates; the dense path has its own, lower limit in :mod:`.eigenanalysis`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ConfigError, FlexmodalError
from ..core.validation import finite_scalar, finite_vector, load_yaml_mapping, reject_unknown_keys, shown
from .fourbar import FourBarParameters, fourbar_guess, fourbar_system
from .linearizations import Penalty
from .pendulum import PendulumParameters, pendulum_guess, pendulum_system

MAX_COORDINATES = 2500     # four-bar N <= 1248 loops, pendulum n_p <= 414 elements
_SIZE = {"fourbar": ("loops", lambda p: 2 * int(p.loops) + 3),
         "pendulum": ("elements", lambda p: 6 * int(p.elements) + 12)}

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
    # deferred: Pinocchio (through robot.registry)
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


def load_paper_model(name_or_path, option_names=None, **overrides) -> PaperModel:
    """The :class:`PaperModel` of a model file with ``overrides`` of its parameters;
    ``option_names`` maps a parameter to the name the user gave it (e.g. {"loops": "--loops"})
    for the errors."""
    path, kind, params, raw = _checked_parameters(name_or_path, option_names, overrides)
    try:
        penalty = _penalty(raw["penalty"], path)
    except FlexmodalError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    _, guess_key, guess_size = _KINDS[kind]
    guess_values = finite_vector(np.atleast_1d(raw[guess_key]), guess_size, guess_key, ConfigError)
    if kind == "fourbar":
        return PaperModel(path.stem, params, fourbar_system(params),
                          fourbar_guess(params, guess_values[0]), penalty)
    return PaperModel(path.stem, params, pendulum_system(params),
                      pendulum_guess(params, *guess_values), penalty)


def paper_model_size(name_or_path, option_names=None, **overrides) -> int:
    """Number of coordinates n of the model :func:`load_paper_model` would build (checked
    parameters, nothing built)."""
    _, kind, params, _ = _checked_parameters(name_or_path, option_names, overrides)
    return _SIZE[kind][1](params)


def _checked_parameters(name_or_path, option_names, overrides):
    """(path, kind, validated parameters, raw file) with the size limit checked."""
    path = model_path(name_or_path)
    raw = load_yaml_mapping(path, "model file", ConfigError)
    kind = raw.get("model")
    if kind not in _KINDS:
        raise ConfigError(f"model: expected one of {', '.join(_KINDS)} in {path}, got {shown(kind)}")
    cls, guess_key, _ = _KINDS[kind]
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
    except FlexmodalError as exc:
        field = str(exc).split(":")[0]
        if field in overrides:          # a command-line value: name the option, not the file
            raise ConfigError(f"{(option_names or {}).get(field, field)}{str(exc)[len(field):]}") from None
        raise ConfigError(f"{path}: {exc}") from None
    key, size = _SIZE[kind]
    if size(params) > MAX_COORDINATES:
        name = (option_names or {}).get(key, key) if key in overrides else f"{path}: {key}"
        raise ConfigError(f"{name}: {getattr(params, key)} gives {size(params)} coordinates, more than the "
                          f"{MAX_COORDINATES} a model may have (flexmodal_ros/constrained/paper_models.py)")
    return path, kind, params, raw


def _penalty(spec, path) -> Penalty:
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: penalty: expected a mapping with alpha, xi, omega")
    reject_unknown_keys(spec, {"alpha", "xi", "omega"}, "penalty", ConfigError)
    missing = sorted({"alpha", "xi", "omega"} - set(spec))
    if missing:
        raise ConfigError(f"{path}: penalty: missing {', '.join(missing)}")
    return Penalty(*(finite_scalar(spec[k], f"penalty.{k}", ConfigError) for k in ("alpha", "xi", "omega")))
