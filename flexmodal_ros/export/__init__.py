"""Export of the flexible-joint structure to Gazebo (URDF/SDF + ros2_control) and MuJoCo (MJCF).

Modules: ``tree`` (the exported structure: rotor link, ``<joint>_motor``, elastic joint per
flexible joint; thesis (2.1), (A I-10)-(A I-18)), ``mjcf`` (MuJoCo writer and loader),
``gazebo`` (URDF/SDF writers, ros2_control block, controllers YAML, world), ``convention``
(the /joint_states convention ``link_state``: absolute | deflection), ``mujoco_plant`` (the MuJoCo
plant of the ``mujoco_simulator`` node and the central-difference linearization of the
independent-engine check), ``fidelity`` (how far each rotor-inertia and link-damping mapping is
from (2.1), by the AMA (2.13)-(2.17)).
"""
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import ConfigError
from ..core.lazy import lazy_exports
from ..core.validation import shown

if TYPE_CHECKING:  # the annotation only; the module is imported on first use below
    from .tree import ExportedRobot

# The writers and the exported structure (Pinocchio) are imported on first use: the nodes import
# this package for the /joint_states convention (convention.py) only.
__getattr__, _LAZY = lazy_exports(__name__, {
    "gazebo": ("controllers_yaml", "world_sdf", "write_sdf", "write_urdf"),
    "mjcf": ("load_mujoco_model", "write_mjcf"),
    "tree": ("LINK_DAMPING_MODES", "ROTOR_MODES", "ExportedRobot", "build_export"),
})

FORMATS = ("urdf", "sdf", "mjcf")
# Defaults per format: the exact mapping where the format has one (MJCF), else the closest
# (fidelity.gazebo_breakdown: gear-coupled rotor, d_f on the elastic joint).
DEFAULTS = {"mjcf": ("armature", "tendon"), "urdf": ("gear", "elastic"), "sdf": ("gear", "elastic")}


@dataclass(frozen=True)
class ExportResult:
    """Files written by :func:`export_files` (None where not applicable) and the mappings used."""
    description: Path
    controllers: Path | None
    world: Path | None
    exported: "ExportedRobot"

    def to_dict(self):
        e = self.exported
        return {"robot": e.name, "description": str(self.description),
                "controllers": str(self.controllers) if self.controllers else None,
                "world": str(self.world) if self.world else None, "rotor": e.rotor,
                "link_damping": e.link_damping, "motor_joints": list(e.motor_joints),
                "elastic_joints": list(e.flexible_joints),
                "gear_ratios": [None if r != r else r for r in e.gear_ratios]}


def export_files(model, fmt, output, rotor=None, link_damping=None, gear_ratio=None, timestep=0.001,
                 controllers=None, world=None):
    """Write the ``fmt`` description of ``model`` to ``output``; for URDF/SDF also the controllers
    YAML (default ``<stem>_controllers.yaml``) and the world SDF (default ``<stem>_world.sdf``)
    next to it. ``rotor``/``link_damping`` default per format (DEFAULTS)."""
    if fmt not in FORMATS:
        raise ConfigError(f"format: expected one of {', '.join(FORMATS)}, got {shown(fmt)}")
    default_rotor, default_damping = DEFAULTS[fmt]
    rotor, link_damping = rotor or default_rotor, link_damping or default_damping
    if fmt == "mjcf" and rotor == "gear":
        raise ConfigError("rotor: 'gear' needs a mimic joint (URDF/SDF); MJCF uses 'armature' (exact) or 'body'")
    if fmt != "mjcf" and (rotor == "armature" or link_damping == "tendon"):
        raise ConfigError(f"{fmt}: rotor 'armature' and link damping 'tendon' exist in MJCF only "
                          "(use rotor gear|body, link damping elastic|motor)")
    if not timestep > 0:
        raise ConfigError(f"timestep: must be > 0 s, got {timestep}")
    # deferred: the writers and the exported structure (Pinocchio), see the package exports above
    from .gazebo import controllers_yaml, world_sdf, write_sdf, write_urdf
    from .mjcf import write_mjcf
    from .tree import build_export

    exported = build_export(model, rotor, link_damping, gear_ratio)
    output = Path(output)
    if not output.parent.is_dir():
        raise ConfigError(f"output: directory {output.parent} does not exist")
    if fmt == "mjcf":
        output.write_text(write_mjcf(exported, timestep))
        return ExportResult(output, None, None, exported)
    controllers = Path(controllers) if controllers else output.with_name(f"{output.stem}_controllers.yaml")
    world = Path(world) if world else output.with_name(f"{output.stem}_world.sdf")
    controllers.write_text(controllers_yaml(exported, round(1.0 / timestep)))
    writer = write_urdf if fmt == "urdf" else write_sdf
    output.write_text(writer(exported, controllers.resolve()))
    world.write_text(world_sdf(exported, timestep))
    return ExportResult(output, controllers, world, exported)


__all__ = sorted(["FORMATS", "DEFAULTS", "ExportResult", "export_files", *_LAZY])
