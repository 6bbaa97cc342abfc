"""Outputs of a calibration: the loadable params YAML, its JSON sidecar, report.md with PNG plots.

- :func:`write_params` — the robot's flexibility YAML (format of config/<robot>.yaml, loadable with
  ``--params``) with k, d_f, d_fm replaced by the calibrated values; the header comments give every
  calibrated parameter's value ± standard deviation, the parameters found not identifiable (their
  nominal value is kept and said so) and the sidecar's name. The user's gains are kept.
- :func:`write_sidecar` — ``<params>.calibration.json``: :meth:`CalibrationResult.to_dict` (the
  experiment: configurations, excitations, measured modes with their σ, fit, validation, timing).
- :func:`write_report` — ``report.md`` (tables) and ``modes.png`` (measured against predicted modes
  at every configuration, calibrated and nominal model), ``convergence.png`` (each unknown ± σ
  after every configuration).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from ..core.errors import InputError
from ..core.validation import load_yaml_mapping
from ..robot.model import with_overrides
from .eigen_sensitivity import loop_modes
from .weighted_fit import follow_modes

UNITS = {"k": "N m/rad", "d_f": "N m s/rad", "d_fm": "N m s/rad"}


def _fmt(value, std=None):
    if std is None:
        return f"{value:.6g}"
    return f"{value:.6g} ± {std:.2g}" if np.isfinite(std) else f"{value:.6g}"


def write_params(result, out_path, plant_label="") -> Path:
    """The calibrated params YAML (module docstring)."""
    model = result.nominal_model
    if model.params_path is None:
        raise InputError("output: the robot has no params file to start from")
    raw = load_yaml_mapping(model.params_path, "params file")
    urdf = Path(str(raw["urdf"]))
    raw["urdf"] = str(urdf if urdf.is_absolute() else (Path(model.params_path).parent / urdf).resolve())
    plant = f", plant {plant_label}" if plant_label else ""
    lines = [f"# Calibrated by flexmodal calibrate: robot {result.robot}{plant}, "
             f"{len(result.configurations)} configuration(s), {result.loop.label}, experiments with K_D x "
             f"{result.experiment_kd_scale:g}",
             f"# {'success' if result.success else 'NO SUCCESS'}: {result.message}",
             "# Calibrated parameters, value ± 1 standard deviation (nominal value in brackets):"]
    for name, value, std, ok, nominal in zip(result.unknown_names, result.values, result.std, result.identifiable,
                                             result.nominal):
        kind, joint = name.split("/", 1)
        if ok:
            raw["joints"][joint][kind] = float(value)
            lines.append(f"#   {name} = {value:.6g} ± {std:.2g} {UNITS[kind]} ({nominal:.6g})")
        else:
            lines.append(f"#   {name}: NOT IDENTIFIABLE from these data: nominal {nominal:.6g} {UNITS[kind]} kept")
    sidecar = sidecar_path(out_path)
    lines.append(f"# Experiment, measured modes and standard deviations: {sidecar.name}")
    out = Path(out_path)
    try:
        out.write_text("\n".join(lines) + "\n" + yaml.safe_dump(raw, sort_keys=False))
    except OSError as exc:
        raise InputError(f"output {out}: cannot write ({exc.strerror})") from None
    return out


def sidecar_path(out_path) -> Path:
    out = Path(out_path)
    return out.with_name(out.stem + ".calibration.json")


def write_sidecar(result, out_path) -> Path:
    path = sidecar_path(out_path)
    path.write_text(json.dumps(result.to_dict(), default=_builtin, indent=1))
    return path


def _builtin(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return str(value)


def mode_table(result):
    """Rows (configuration label, f measured, ζ measured, σ_f, σ_ζ, f calibrated, ζ calibrated, f nominal,
    ζ nominal, used in fit) of every measured mode."""
    nominal_exp = result.nominal_model
    rows = []
    for data, used in [(c, True) for c in result.configurations] + [(c, False) for c in result.validation]:
        if data.references is None or not data.modes:
            continue
        idx = np.array([m["mode_index"] for m in data.modes], int)
        nominal = loop_modes(_experiment(nominal_exp, result), data.q, result.loop)
        j = follow_modes(data.references, nominal, idx)
        label = f"{'C' if used else 'V'}{data.index + 1}"
        for m, i, k in zip(data.modes, idx, j):
            rows.append((label, m["frequency_hz"], m["damping_ratio"], m["std_frequency_hz"], m["std_damping_ratio"],
                         float(data.references.frequencies_hz[i]), float(data.references.damping_ratios[i]),
                         float(nominal.frequencies_hz[k]), float(nominal.damping_ratios[k]), used))
    return rows


def _experiment(model, result):
    return with_overrides(model, kd=np.asarray(model.kd, float) * result.experiment_kd_scale)


def write_report(result, directory, plot=True) -> dict:
    """report.md, modes.png, convergence.png under ``directory``; returns {name: path}."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    rows = mode_table(result)
    lines = [f"# Calibration of {result.robot}", "",
             f"{'Success' if result.success else 'No success'}: {result.message}. "
             f"{len(result.configurations)} configuration(s) measured, {len(result.validation)} for validation; "
             f"{result.loop.label}; experiments with K_D x {result.experiment_kd_scale:g}.", "",
             "## Parameters", "",
             "| unknown | nominal | calibrated | σ | σ / scale | status |"
             + (" truth | error/σ |" if result.truth is not None else ""),
             "|---|---|---|---|---|---|" + ("---|---|" if result.truth is not None else "")]
    scale = np.where(result.nominal > 0, result.nominal, np.nan)
    for i, name in enumerate(result.unknown_names):
        std = result.std[i]
        rel = std / scale[i] if np.isfinite(scale[i]) else float("nan")
        status = "identified" if result.identifiable[i] else "not identifiable (nominal kept)"
        row = (f"| {name} | {result.nominal[i]:.6g} | {result.values[i]:.6g} | "
               f"{std:.3g} | {rel:.3g} | {status} |")
        if result.truth is not None:
            err = (result.values[i] - result.truth[i]) / std if np.isfinite(std) and std > 0 else float("nan")
            row += f" {result.truth[i]:.6g} | {err:+.2f} |"
        lines.append(row)
    if result.design is not None:
        d = result.design
        lines += ["", "## Design", "",
                  "Worst predicted relative σ over the identifiable unknowns after each designed configuration: "
                  + ", ".join(f"{v:.3g}" for v in d.designed) + ".",
                  f"Random configurations ({len(d.needed_random)} draws) needed to reach the designed value at "
                  f"{d.budget}: " + ", ".join("> %d" % d.random.shape[1] if not np.isfinite(v) else str(int(v))
                                                for v in d.needed_random) + "."]
    lines += ["", "## Measured and predicted modes", "",
              "C = configuration used in the fit, V = validation (not used).", "",
              "| config | f meas [Hz] | ζ meas [%] | σ_f [Hz] | σ_ζ [pp] | f cal. | ζ cal. [%] | f nom. "
              "| ζ nom. [%] |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:.4f} | {100 * r[2]:.3f} | {r[3]:.2g} | {100 * r[4]:.2g} | {r[5]:.4f} | "
                     f"{100 * r[6]:.3f} | {r[7]:.4f} | {100 * r[8]:.3f} |")
    if result.validation:
        v = result.validation_errors()
        lines += ["", "## Validation (configurations not used in the fit)", "",
                  "| model | max abs(Δf)/f | max abs(Δζ) [pp] | modes |", "|---|---|---|---|"]
        for label in ("calibrated", "nominal"):
            lines.append(f"| {label} | {v[label]['max_frequency_error_rel']:.3g} | "
                         f"{100 * v[label]['max_damping_error']:.3g} | {v[label]['modes']} |")
    if result.tracking and "calibrated" in result.tracking:
        t = result.tracking
        lines += ["", f"## Tracking ({t['trajectory']}, true plant)", "",
                  "| feedforward model | max error [rad] | RMS error [rad] |", "|---|---|---|"]
        for label in ("calibrated", "true", "nominal"):
            lines.append(f"| {label} | {t[label]['max_tracking_error_rad']:.3g} | "
                         f"{t[label]['rms_tracking_error_rad']:.3g} |")
        lines.append(f"\ncalibrated / true = {t['calibrated_over_true']:.3g}; nominal / calibrated = "
                     f"{t['nominal_over_calibrated']:.3g}")
    lines += ["", "## Time [s]", "", "| stage | s |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in result.timing.items()]
    files["report"] = out / "report.md"
    files["report"].write_text("\n".join(lines) + "\n")
    if plot and rows:
        files["modes_png"] = _plot_modes(rows, out / "modes.png", result.robot)
    if plot and result.history:
        files["convergence_png"] = _plot_convergence(result, out / "convergence.png")
    return files


def _plot_modes(rows, path, robot):
    import matplotlib   # deferred: matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    f = np.array([r[1] for r in rows])
    used = np.array([r[9] for r in rows])
    fig, (ax_f, ax_z) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for k, (label, marker) in enumerate((("calibrated", "o"), ("nominal", "x"))):
        fp = np.array([r[5 + 2 * k] for r in rows])
        zp = np.array([r[6 + 2 * k] for r in rows])
        for mask, kind in ((used, "fit"), (~used, "validation")):
            if mask.any():
                ax_f.plot(f[mask], 100 * (fp[mask] / f[mask] - 1), marker, linestyle="none",
                          label=f"{label} model, {kind}", alpha=0.8)
                ax_z.plot(f[mask], 100 * (zp[mask] - np.array([r[2] for r in rows])[mask]), marker,
                          linestyle="none", alpha=0.8)
    ax_f.axhline(0, color="k", lw=0.5)
    ax_z.axhline(0, color="k", lw=0.5)
    ax_f.set_xscale("log")
    ax_f.set_ylabel("predicted f / measured f − 1 [%]")
    ax_z.set_ylabel("predicted ζ − measured ζ [pp]")
    ax_z.set_xlabel("measured natural frequency [Hz]")
    ax_f.legend(fontsize="small")
    ax_f.set_title(f"{robot}: measured against predicted modes at every configuration")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_convergence(result, path):
    import matplotlib   # deferred: matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    kinds = sorted({n.split("/")[0] for n in result.unknown_names}, key=["k", "d_f", "d_fm"].index)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(9, 3 * len(kinds)), sharex=True, squeeze=False)
    steps = np.arange(1, len(result.history) + 1)
    values = np.array([h["values"] for h in result.history])
    std = np.array([[np.inf if s is None else s for s in h["std"]] for h in result.history])
    for ax, kind in zip(axes[:, 0], kinds):
        for i, name in enumerate(result.unknown_names):
            if not name.startswith(kind + "/"):
                continue
            ref = result.nominal[i] if result.nominal[i] > 0 else 1.0
            line, = ax.plot(steps, values[:, i] / ref, marker=".", label=name.split("/")[1])
            finite = np.isfinite(std[:, i])
            ax.fill_between(steps[finite], (values[finite, i] - std[finite, i]) / ref,
                            (values[finite, i] + std[finite, i]) / ref, color=line.get_color(), alpha=0.2)
            if result.truth is not None:
                ax.axhline(result.truth[i] / ref, color=line.get_color(), lw=0.6, ls="--")
        ax.set_ylabel(f"{kind} / nominal" if kind == "k" else f"{kind} / nominal (1 if 0)")
        ax.legend(fontsize="x-small", ncol=4)
    axes[-1, 0].set_xlabel("configurations measured")
    axes[0, 0].set_title(f"{result.robot}: estimates ± 1 σ (dashed: truth)" if result.truth is not None
                         else f"{result.robot}: estimates ± 1 σ")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
