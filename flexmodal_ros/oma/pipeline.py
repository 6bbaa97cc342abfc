"""The whole OMA run used by the CLI and the ``modal_test`` node: identify the modes of a record,
compare them with the model (continuous AMA, and the sampled-data AMA when a controller rate is
given), write ``oma.json``, ``oma.csv``, ``stabilization.png`` and the identification data file
(``identify_data.yaml``, the format of ``flexmodal identify --data``)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..core.errors import InputError
from ..flexible_joint.ama import modal_analysis
from ..core.validation import load_yaml_mapping
from .mode_estimation import IdentifiedModes, as_records, identify_modes
from .compare import (IDENTIFIED, Comparison, check_model_channels, compare_with_model, predicted_response,
                      write_comparison_csv)
from .record import Record
from .stabilization import plot_stabilization
from ..flexible_joint.sampled import sampled_modal_analysis
import csv


@dataclass(frozen=True)
class OmaResult:
    """``record`` (the first of ``records`` when several references were analysed together);
    ``identified`` modes; ``comparisons`` with the model (first: continuous AMA; second:
    sampled-data AMA if a controller rate was given; empty without a model); ``model`` and ``q``
    (or None); ``seconds`` spent identifying; ``files`` written; ``records`` all records."""

    record: Record
    identified: IdentifiedModes
    comparisons: list
    model: object = None
    q: np.ndarray | None = None
    seconds: float = 0.0
    files: dict = field(default_factory=dict)
    records: tuple = ()

    def to_dict(self) -> dict:
        summary = lambda rec: {"channels": list(rec.channels), "sample_rate_hz": rec.sample_rate_hz,
                               "samples": rec.num_samples, "duration_s": rec.duration,
                               "warnings": list(rec.warnings), "metadata": rec.metadata}
        return {"record": summary(self.record), "records": [summary(r) for r in self.records or (self.record,)],
                "robot": None if self.model is None else self.model.name,
                "q": None if self.q is None else self.q.tolist(),
                "identified": self.identified.to_dict(),
                "comparisons": [c.to_dict() for c in self.comparisons],
                "identification_seconds": self.seconds, "files": {k: str(v) for k, v in self.files.items()}}


def run_oma(record, model=None, q=None, method: str = "era", orders=None, controller_rate_hz=None,
            hold: str = "zoh", snr_min=None, free_decay: bool = True) -> OmaResult:
    """Identify the modes of ``record`` (a :class:`Record` or a list of references, e.g. impacts
    along several axes: :func:`~flexmodal_ros.oma.mode_estimation.identify_modes`); with ``model`` and
    ``q`` compare them with the AMA (and the sampled-data AMA at ``controller_rate_hz`` with
    ``hold``). Simulated impact records carry their excitation, so unidentified modes are judged
    from their predicted amplitudes (:mod:`~flexmodal_ros.oma.visibility`)."""
    records = as_records(record)
    options = {} if snr_min is None else {"snr_min": snr_min}
    t0 = time.perf_counter()
    identified = identify_modes(records, method, orders, free_decay=free_decay, **options)
    seconds = time.perf_counter() - t0
    comparisons = []
    if model is not None:
        if q is None:
            raise InputError("q: the configuration is needed to compare with the model")
        rows = check_model_channels(model, records[0].channels)
        response = predicted_response(model, q, records, free_decay)
        comparisons.append(compare_with_model(identified, modal_analysis(model, q), rows, records, "continuous AMA",
                                              free_decay=free_decay, response=response, **options))
        if controller_rate_hz:
            sampled = sampled_modal_analysis(model, q, controller_rate_hz, hold)
            comparisons.append(compare_with_model(identified, sampled, rows, records,
                                                  f"sampled-data AMA {controller_rate_hz:g} Hz {hold}",
                                                  free_decay=free_decay, response=response, **options))
    return OmaResult(records[0], identified, comparisons, model, None if q is None else np.asarray(q, float), seconds,
                     records=tuple(records))


def write_outputs(result: OmaResult, out_dir, plot: bool = True, data_out=None, files=None) -> OmaResult:
    """Write oma.json, oma.csv, stabilization.png (``plot``) and, with a model, identify_data.yaml
    (or append the measurement to ``data_out``); returns the result with ``files`` filled
    (``files``: further files already written, e.g. the saved record, listed in oma.json too)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = dict(files or {})
    if result.comparisons:
        files["csv"] = write_comparison_csv(result.comparisons[0], result.identified, out / "oma.csv")
    else:
        files["csv"] = _write_modes_csv(result.identified, out / "oma.csv")
    if plot and result.identified.diagram is not None:
        ref = result.comparisons[-1].rows if result.comparisons else []
        title = (f"{result.model.name if result.model else 'record'}: stabilization diagram "
                 f"({result.identified.method}, {result.record.num_channels} channels; dashed: model)")
        files["png"] = plot_stabilization(result.identified.diagram, out / "stabilization.png", title,
                                          [r.ama_frequency_hz for r in ref], result.identified.frequencies_hz)
    if result.model is not None and result.comparisons:
        target = Path(data_out) if data_out else out / "identify_data.yaml"
        files["identify_data"] = append_measurement(target, result.model, result.q, result.comparisons[0], out)
    files["json"] = out / "oma.json"
    done = OmaResult(**{**result.__dict__, "files": files})
    files["json"].write_text(json.dumps(done.to_dict(), default=_builtin))
    return done


def _builtin(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(type(value).__name__)


def _write_modes_csv(identified, path):
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["oma_mode", "frequency_hz", "damping_ratio", "amplitude", "snr"])
        for i, (f, z, a, s) in enumerate(zip(identified.frequencies_hz, identified.damping_ratios,
                                             identified.amplitudes, identified.snr)):
            w.writerow([i + 1, f, z, a, s])
    return Path(path)


def model_params_file(model, directory) -> Path:
    """A complete flexibility YAML of ``model`` as used (tool, gains, gravity may differ from the
    robot's file), next to the outputs: what ``identify --data`` must load to see the same robot."""
    raw = load_yaml_mapping(model.params_path, "params")
    urdf = model.urdf_path or (Path(model.params_path).parent / raw["urdf"])
    raw["urdf"] = str(Path(urdf).resolve())
    tool = model.tool
    inertia = np.asarray(tool.inertia)
    raw["tool"] = {"mass": float(tool.mass), "com": [float(v) for v in tool.com],
                   "inertia": [float(inertia[i, j]) for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]}
    raw["gravity"] = [float(v) for v in model.gravity]
    raw["wrench"] = [float(v) for v in model.wrench]
    for j, name in enumerate(model.joint_names):
        raw["joints"][name]["kp"] = float(model.kp[j])
        raw["joints"][name]["kd"] = float(model.kd[j])
    path = Path(directory) / f"{model.name}_params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path.resolve()


def append_measurement(path, model, q, comparison: Comparison, directory) -> Path:
    """Add this configuration's identified modes (with the model mode they matched, 0-based) to the
    identification data file ``path`` (created if absent; it must name the same params file)."""
    path = Path(path)
    params = model_params_file(model, path.parent if path.parent != Path("") else directory)
    modes = [{"frequency_hz": float(r.oma_frequency_hz), "damping_ratio": float(r.oma_damping_ratio),
              "mode_index": int(r.mode - 1)} for r in comparison.rows if r.status == IDENTIFIED]
    if not modes:
        raise InputError("identify data: no identified mode matched the model; nothing to write")
    data = {"params": str(params), "measurements": []}
    if path.is_file():
        data = load_yaml_mapping(path, "identify data")
        if Path(str(data.get("params", ""))).resolve() != params:
            raise InputError(f"--data-out {path}: written for another robot model ({data.get('params')})")
    data["measurements"].append({"q": [float(v) for v in q], "modes": modes})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
