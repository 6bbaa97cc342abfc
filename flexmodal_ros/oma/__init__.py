"""Operational modal analysis (OMA): modes identified from motion data, checked against the AMA.

Thesis T.T. Do (2021) §2.4.3 validates the analytical modal analysis by an impact test: 50 N on the
tool along y0 for 6 ms, motor positions recorded, modes identified by a VAR model of orders 2–100
and a stabilization diagram (Table 2.5, OMA columns). Modules:

- :mod:`.record` — :class:`~.record.Record` (uniform multichannel samples), validation, resampling
  of uneven stamps, free-decay start, CSV;
- :mod:`.bags` — ROS 2 bags (sqlite3, MCAP) through ``rosbags``;
- :mod:`.impact` — the simulated impact test: closed loop (2.1)+(2.2) with the continuous (or
  sampled and held) set-point law, encoder quantization and noise;
- :mod:`.estimators` — pole estimators over model orders: VAR (thesis), SSI-cov, ERA;
- :mod:`.stabilization` — stabilization diagram (Δf, Δζ, MAC) and selection by clustering;
- :mod:`.mode_estimation` — :func:`~.mode_estimation.identify_modes` → :class:`~.mode_estimation.IdentifiedModes`
  (a :class:`~flexmodal_ros.modes.modeset.ModeSet`): amplitudes, SNR, noise floor, refinement;
- :mod:`.compare` — identified vs model modes (frequency + MAC), status per model mode;
- :mod:`.pipeline` — the run used by ``flexmodal oma`` and the ``modal_test`` node, output files.

The sampled-data AMA (law at a finite rate with zero-order hold) is
:mod:`flexmodal_ros.flexible_joint.sampled`.
"""
