"""The modal toolkit every capability shares: eigenvalues → modes and everything done with them.

- :mod:`.modeset` — :class:`ModeSet` (the documented contract: f, ζ, eigenvalues, shapes, real
  eigenvalues, stability), f and ζ from λ, the one real/oscillatory rule (``REAL_RTOL``), ordering,
  stability classification, batched builders from LAPACK output (:class:`SpectrumModes`);
- :mod:`.uncertainty` — σ_f, σ_ζ from the covariance of λ (delta method);
- :mod:`.tracking` — MAC, tracking along sweeps, crossings, eigenvalue and mode matching;
- :mod:`.modal_map` — :class:`ModalMap`, CSV/JSON output, plots, progress bars.
"""
from .modal_map import ModalMap, map_modes, plot_map, plot_tracked, progress_bar, write_csv, write_json
from .modeset import (MARGINAL, REAL_RTOL, STABILITY_RTOL, STABLE, TWO_PI, UNSTABLE, ModeSet, SpectrumModes,
                      classify_stability, damped_frequencies, eigenvalues_from, first_mode_set, frequencies_and_damping, is_oscillatory,
                      is_real, lowest_modes, mode_order, mode_sets, modes_from_classified, modes_from_eigen, modes_from_eigenpairs, modes_from_real_eigenpairs,
                      normalize_shapes, snap_to_axis, spectrum_modes)
from .tracking import (Crossing, crossings_from_tracked, mac, mac_assignment, match_eigenvalues, pair_modes,
                       track_modes)
from .uncertainty import frequency_damping_std, pair_covariances

__all__ = ["ModalMap", "map_modes", "plot_map", "plot_tracked", "progress_bar", "write_csv", "write_json",
           "MARGINAL", "REAL_RTOL", "STABILITY_RTOL", "STABLE", "TWO_PI", "UNSTABLE", "ModeSet", "SpectrumModes",
           "classify_stability", "damped_frequencies", "eigenvalues_from", "first_mode_set", "frequencies_and_damping", "is_oscillatory",
           "is_real", "lowest_modes", "mode_order", "mode_sets", "modes_from_classified", "modes_from_eigen", "modes_from_eigenpairs", "modes_from_real_eigenpairs",
           "normalize_shapes", "snap_to_axis", "spectrum_modes", "Crossing", "crossings_from_tracked", "mac",
           "mac_assignment", "match_eigenvalues", "pair_modes", "track_modes", "frequency_damping_std",
           "pair_covariances"]
