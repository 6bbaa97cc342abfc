"""ament_python package flexmodal_ros (also `pip install -e .`-able; versions are pinned in requirements.txt)."""
from glob import glob
import os

from setuptools import find_packages, setup

PACKAGE = "flexmodal_ros"


def share_files(directory):
    """(install dir, files) for the regular files directly under `directory` (urdf/, config/, launch/)."""
    files = sorted(f for f in glob(os.path.join(directory, "*")) if os.path.isfile(f))
    return (os.path.join("share", PACKAGE, directory), files)


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["*.c", "*/*.c"]},   # hand-written C kernels, compiled on first use (ccompile.py)
    data_files=[
        ("share/ament_index/resource_index/packages", [os.path.join("resource", PACKAGE)]),
        (os.path.join("share", PACKAGE), ["package.xml"]),
        share_files("urdf"),
        share_files("config"),
        share_files("config/constrained"),
        share_files("launch"),
    ],
    # Runtime dependencies (ROS 2 wheels, Pinocchio, CasADi, ...) are pinned in requirements.txt
    # (`make setup`) or come from rosdep (package.xml) in a ROS 2 workspace.
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="flexmodal maintainers",
    maintainer_email="maintainers@flexmodal.dev",
    description="Flexible-joint robots: modal analysis, identification, symbolic inverse dynamics, control.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "flexmodal = flexmodal_ros.cli:main",
            "modal_analysis_server = flexmodal_ros.nodes.modal_analysis_server:main",
            "identification_server = flexmodal_ros.nodes.identification_server:main",
            "feedforward_pd_controller = flexmodal_ros.nodes.feedforward_pd_controller:main",
            "flexible_joint_simulator = flexmodal_ros.nodes.flexible_joint_simulator:main",
            "mujoco_simulator = flexmodal_ros.nodes.mujoco_simulator:main",
            "flexmodal_bringup = flexmodal_ros.nodes.bringup:main",
            "modal_test = flexmodal_ros.nodes.modal_test:main",
            "calibration_server = flexmodal_ros.nodes.calibration_server:main",
        ],
    },
)
