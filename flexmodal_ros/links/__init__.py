"""Flexible links: planar multilink arms of Timoshenko or Euler-Bernoulli beams (no rclpy).

di Castri & Messina (2011), "Vibration analysis of multilink manipulators based on Timoshenko beam
theory" (seed 002, notes_002): each link a uniform beam with axial and in-plane bending motion,
tip bodies (motors, payload) at the joints, natural frequencies as the roots of det M(ω) = 0 (40)
of the 6n×6n characteristic matrix (37)-(39), mode shapes by (41)-(44). Three beam models:
Timoshenko (Appendix A), Euler-Bernoulli with axial dynamics (EB†, Appendix B) and inextensible
Euler-Bernoulli (EB‡), both frequency regimes ω ≷ ω_lim; elastic joints beyond the paper.

- :mod:`.beam` — per-link data (:class:`Beam`), cross sections (rectangle, hollow rectangle);
- :mod:`.arm` — the arm (:class:`LinkArm`) from a robot's URDF + YAML ``links:``, joint models;
- :mod:`.characteristic` — M(ω) block by block, (A.1)-(A.4), (B.1)-(B.4) with the typo fixes;
- :mod:`.stiffness` — exact dynamic stiffness and the Wittrick–Williams root count;
- :mod:`.solve` — roots, confirmation by the smallest singular value, null vectors;
- :mod:`.shapes` — mode shapes (:class:`LinkModes`), normalization, deformed-arm plots;
- :mod:`.sweeps` — sweeps with tracking;
- :mod:`.fe` — an independent finite-element model (the cross-check).
"""
from ..core.lazy import lazy_exports

# Names imported on first use: a process that only asks whether a robot has links (the modal
# server at start-up) does not load the solvers and SciPy.
__getattr__, __all__ = lazy_exports(__name__, {
    "arm": ("JOINT_MODELS", "LinkArm", "has_links", "link_arm_from_model", "load_link_arm", "make_arm",
            "with_joints", "with_thickness"),
    "beam": ("BEAM_MODELS", "Beam", "Section", "cowper_rectangle", "hollow_rectangle", "make_beam", "rectangle"),
    "characteristic": ("characteristic_matrix",),
    "sweeps": ("link_modal_map", "link_modes_batch"),
    "shapes": ("LinkModes",),
    "solve": ("link_modes", "natural_frequencies"),
})
