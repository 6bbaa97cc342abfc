"""ament_python package flexmodal_ros (also `pip install -e .`-able; versions are pinned in requirements.txt)."""
from glob import glob
import os
import sys

from setuptools import Extension, find_packages, setup

PACKAGE = "flexmodal_ros"


def share_files(directory):
    """(install dir, files) for the regular files directly under `directory` (urdf/, config/, launch/)."""
    files = sorted(f for f in glob(os.path.join(directory, "*")) if os.path.isfile(f))
    return (os.path.join("share", PACKAGE, directory), files)


def lapack_extension():
    """flexmodal_ros.linalg.lapack_kernel: dgeev + mode extraction (lapack_kernel.pyx, lapack_batch.c)
    against SciPy's documented ``scipy.linalg.cython_lapack``, built here at install time (``make
    setup``, ``pip install --no-build-isolation``, ``colcon build``). Needs Cython and SciPy in the
    build environment (pinned in requirements.txt); without them, or if the compiler fails
    (``optional``), the package installs without it and falls back at run time, saying so once."""
    try:
        from Cython.Build import cythonize
        import scipy.linalg  # noqa: F401  (cython_lapack.pxd is found on sys.path)
    except ImportError as exc:
        print(f"flexmodal_ros: building without the LAPACK extension ({exc}); the modal analysis "
              "will fall back to SciPy's Python LAPACK wrappers (slower, it warns once)", file=sys.stderr)
        return []
    folder = os.path.join(PACKAGE, "linalg")
    extension = Extension(f"{PACKAGE}.linalg.lapack_kernel",
                          [os.path.join(folder, "lapack_kernel.pyx"), os.path.join(folder, "lapack_batch.c")],
                          include_dirs=[folder], extra_compile_args=["-O2"], optional=True)
    return cythonize([extension], compiler_directives={"language_level": 3}, quiet=True)


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
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
    ext_modules=lapack_extension(),
    zip_safe=False,
    maintainer="flexmodal maintainers",
    maintainer_email="maintainers@flexmodal.dev",
    description="Flexible-joint robots: modal analysis, identification, symbolic inverse dynamics, control.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "flexmodal = flexmodal_ros.cli:main",
            "modal_analysis_server = flexmodal_ros.nodes.entry_points:modal_analysis_server",
            "identification_server = flexmodal_ros.nodes.entry_points:identification_server",
            "feedforward_pd_controller = flexmodal_ros.nodes.entry_points:feedforward_pd_controller",
            "flexible_joint_simulator = flexmodal_ros.nodes.entry_points:flexible_joint_simulator",
            "mujoco_simulator = flexmodal_ros.nodes.entry_points:mujoco_simulator",
            "flexmodal_bringup = flexmodal_ros.nodes.entry_points:flexmodal_bringup",
            "modal_test = flexmodal_ros.nodes.entry_points:modal_test",
            "calibration_server = flexmodal_ros.nodes.entry_points:calibration_server",
        ],
    },
)
