"""flexmodal_ros: modal analysis, identification, shaping and control of robots with elastic joints
and links — a ROS-free core (the subpackages below) with thin rclpy nodes on top (``nodes``).

The public Python API, in one place (each name is imported on first use, so ``import flexmodal_ros``
costs nothing; docs/ARCHITECTURE.md shows the layers)::

    import flexmodal_ros as fm
    model = fm.load_robot("kuka_lwr4")                 # immutable FlexibleJointModel (Pinocchio style)
    data = fm.create_data(model)                        # its work buffers, one per thread
    modes = fm.modal_analysis(model, q, data)           # a ModeSet: f [Hz], ζ, eigenvalues, shapes, stability

Robot model (``robot``): load_robot, load_model, list_robots, create_data, with_overrides, Tool,
FlexibleJointModel, mass_matrix, gravity_torque, ee_jacobian.
Modal toolkit (``modes``): ModeSet, ModalMap, frequencies_and_damping, mac, track_modes, map_modes.
Flexible-joint modal analysis (``flexible_joint``): modal_analysis, modal_analysis_batch,
modal_analysis_arrays, modal_map, config_grid, config_line, sampled_modal_analysis.
Identification (``identification``): identify, modal_data, load_data_file.
Controller and simulation (``control``, ``simulation``): FailSafeController, SafetyLimits,
run_closed_loop, FlexibleJointPlant, Simulator.
Flexible links (``links``): link_modes, load_link_arm.
Constrained mechanisms (``constrained``): constrained_modal_analysis (= constrained.modal_analysis),
static_equilibrium, load_closed_chain.
Polynomial eigenpairs (``expansion``): expand, ModalPolynomial.
Operational modal analysis (``oma``): identify_modes, run_oma, simulate_impact.
Input shaping (``shaping``): shape_trajectory, ReferenceShaper.
Export (``export``): export_files.
Distributed (``distributed``): open_executor, sweep_to_store.
Errors (``core.errors``): FlexmodalError, ConfigError, InputError, BuildError.
"""
from .core.lazy import lazy_exports

__version__ = "0.1.0"

__getattr__, __all__ = lazy_exports(__name__, {
    "robot.registry": ("load_robot", "list_robots"),
    "robot.model": ("FlexibleJointModel", "load_model", "create_data", "with_overrides", "mass_matrix",
                    "gravity_torque", "ee_jacobian"),
    "robot.params": ("Tool",),
    "modes": ("ModeSet", "ModalMap", "frequencies_and_damping", "mac", "track_modes", "map_modes"),
    "flexible_joint.ama": ("modal_analysis", "modal_analysis_batch", "modal_analysis_arrays"),
    "flexible_joint.sweep": ("modal_map", "config_grid", "config_line"),
    "flexible_joint.sampled": ("sampled_modal_analysis",),
    "identification.fit": ("identify",),
    "identification.measurements": ("modal_data", "load_data_file"),
    "control": ("FailSafeController", "SafetyLimits"),
    "simulation": ("run_closed_loop", "FlexibleJointPlant", "Simulator"),
    "links": ("link_modes", "load_link_arm"),
    "constrained": ("static_equilibrium",),
    "constrained.closed_chain": ("load_closed_chain",),
    "expansion": ("expand", "ModalPolynomial"),
    "oma.mode_estimation": ("identify_modes",),
    "oma.pipeline": ("run_oma",),
    "oma.impact": ("simulate_impact",),
    "shaping": ("shape_trajectory", "ReferenceShaper"),
    "export": ("export_files",),
    "distributed": ("open_executor", "sweep_to_store"),
    "core.errors": ("FlexmodalError", "ConfigError", "InputError", "BuildError"),
})


def constrained_modal_analysis(*args, **kwargs):
    """:func:`flexmodal_ros.constrained.modal_analysis` (MCS / RCS / UCS linearizations)."""
    from .constrained import modal_analysis  # deferred: SciPy sparse and CasADi of the constrained core

    return modal_analysis(*args, **kwargs)
