# flexmodal_ros developer entry points. `make setup` is idempotent: each step is keyed on a stamp
# file and reruns only when its inputs change (requirements files, interface sources, setup files).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := setup

PYTHON ?= python3.11
JOBS ?= $(shell nproc)
PYTEST_ARGS ?=

# ROS 2 distribution of the wheel set: kilted (default) or jazzy, i.e. requirements.txt (common to
# both) + requirements-ros-$(ROS_DISTRO).txt. Taken from the command line or the environment (a
# shell set up by `. scripts/env.sh jazzy` exports ROS_DISTRO=jazzy). Each distribution has its own
# virtualenv and build tree, so switching never mixes two wheel sets and switching back costs
# nothing: kilted -> .venv and build/, another one -> .venv-<distro> and build-<distro>/.
ROS_DISTRO ?= kilted
ROS_DISTROS := $(patsubst requirements-ros-%.txt,%,$(wildcard requirements-ros-*.txt))
ifeq ($(filter $(ROS_DISTRO),$(ROS_DISTROS)),)
$(error ROS_DISTRO=$(ROS_DISTRO) is not supported: one of $(ROS_DISTROS) (requirements-ros-<distro>.txt))
endif
export ROS_DISTRO
ROS_REQUIREMENTS := requirements-ros-$(ROS_DISTRO).txt
DISTRO_SUFFIX := $(if $(filter kilted,$(ROS_DISTRO)),,-$(ROS_DISTRO))
VENV := .venv$(DISTRO_SUFFIX)
BUILD := build$(DISTRO_SUFFIX)
VENV_PY := $(VENV)/bin/python

# NumPy/SciPy: `pinned` (requirements.txt, the newest) or `ubuntu2404` (Ubuntu 24.04's 1.26.4 /
# 1.11.4: requirements-numerics-ubuntu2404.txt replaces those pins, scripts/numerics_requirements.py).
# Orthogonal to ROS_DISTRO: switched in place inside the distribution's virtualenv.
NUMERICS ?= pinned
NUMERICS_FILE := $(if $(filter-out pinned,$(NUMERICS)),requirements-numerics-$(NUMERICS).txt,)

IF_DIR := $(BUILD)/interfaces
IF_PREFIX := $(abspath $(IF_DIR)/install)
NATIVE_DIR := $(BUILD)/native
NATIVE_PREFIX := $(abspath $(NATIVE_DIR)/install)
STAMPS := $(BUILD)/stamps
# Lives inside the virtualenv so that a new virtualenv reinstalls the requirements; one per
# (distribution, NUMERICS) choice.
REQ_STAMP := $(VENV)/.flexmodal-requirements-$(ROS_DISTRO)-$(NUMERICS).stamp
# The distribution whose wheels the virtualenv holds (read by scripts/env.sh). A virtualenv of
# another distribution (possible only with VENV=... given) is recreated, never installed over.
DISTRO_MARKER := $(VENV)/.flexmodal-ros-distro
IF_STAMP := $(STAMPS)/interfaces.stamp
NATIVE_STAMP := $(STAMPS)/native.stamp
PKG_STAMP := $(STAMPS)/flexmodal_ros.stamp

IF_SOURCES := flexmodal_interfaces/CMakeLists.txt flexmodal_interfaces/package.xml \
	flexmodal_interfaces/msg flexmodal_interfaces/srv flexmodal_interfaces/action \
	$(wildcard flexmodal_interfaces/msg/*.msg flexmodal_interfaces/srv/*.srv flexmodal_interfaces/action/*.action)
NATIVE_SOURCES := flexmodal_native/CMakeLists.txt flexmodal_native/package.xml flexmodal_native/src \
	$(wildcard flexmodal_native/src/*.c flexmodal_native/src/*.h)
PKG_SOURCES := setup.py setup.cfg package.xml resource/flexmodal_ros Makefile \
	flexmodal_ros/linalg/lapack_kernel.pyx flexmodal_ros/linalg/lapack_batch.c flexmodal_ros/linalg/lapack_batch.h
PKG_SHARE := $(VENV)/share/flexmodal_ros
PKG_LIB := $(VENV)/lib/flexmodal_ros
LAYOUT_STAMP := $(STAMPS)/ros_layout.stamp
SHARE_DIRS := launch urdf config
AMENT_MARKER := $(VENV)/share/ament_index/resource_index/packages/flexmodal_ros

export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup venv test test-quick test-jazzy test-numerics demo demo-mujoco clean distclean

# Last step: byte-compile the package as a regular pip or colcon install does (an editable install
# does not): without it, every node start compiles ~200 modules again when PYTHONDONTWRITEBYTECODE
# is set (modal server, 5 interleaved starts at load 9-11: CPU to the first answer 1.38 -> 1.19 s,
# wall 2.9 -> 1.9 s). Up-to-date files are skipped; a stale .pyc is never used (Python checks the
# source's mtime).
setup: $(REQ_STAMP) $(IF_STAMP) $(NATIVE_STAMP) $(PKG_STAMP) $(LAYOUT_STAMP)
	$(VENV_PY) -m compileall -q -j 0 flexmodal_ros

# Only the virtualenv with its pinned wheels (.ci/run fills both distributions' in parallel).
venv: $(REQ_STAMP)

$(VENV_PY):
	$(PYTHON) -m venv $(VENV)

$(REQ_STAMP): requirements.txt $(ROS_REQUIREMENTS) $(NUMERICS_FILE) | $(VENV_PY)
	if [ -e $(DISTRO_MARKER) ] && [ "$$(cat $(DISTRO_MARKER))" != $(ROS_DISTRO) ]; then \
		echo "$(VENV) holds ROS $$(cat $(DISTRO_MARKER))'s wheels: recreating it for $(ROS_DISTRO)"; \
		rm -rf $(VENV); $(PYTHON) -m venv $(VENV); fi
	echo $(ROS_DISTRO) > $(DISTRO_MARKER)
ifeq ($(NUMERICS_FILE),)
	$(VENV_PY) -m pip install -r requirements.txt -r $(ROS_REQUIREMENTS)
else
	mkdir -p $(BUILD)
	$(VENV_PY) scripts/numerics_requirements.py requirements.txt $(NUMERICS_FILE) $(BUILD)/requirements-$(NUMERICS)
	$(VENV_PY) -m pip install -r $(BUILD)/requirements-$(NUMERICS).txt -r $(ROS_REQUIREMENTS)
	$(VENV_PY) -m pip install --no-deps -r $(BUILD)/requirements-$(NUMERICS)-no-deps.txt
endif
	rm -f $(VENV)/.flexmodal-requirements-*.stamp
	touch $@

# Plain CMake build of the ament_cmake interface package against the virtualenv prefix.
$(IF_STAMP): $(IF_SOURCES) $(REQ_STAMP)
	rm -rf $(IF_DIR)
	AMENT_PREFIX_PATH=$(abspath $(VENV)) cmake -S flexmodal_interfaces -B $(IF_DIR)/build \
		-DCMAKE_PREFIX_PATH=$(abspath $(VENV)) -DPython3_EXECUTABLE=$(abspath $(VENV_PY)) \
		-DCMAKE_INSTALL_PREFIX=$(IF_PREFIX) -DBUILD_TESTING=OFF
	cmake --build $(IF_DIR)/build -j $(JOBS)
	cmake --install $(IF_DIR)/build
	mkdir -p $(STAMPS)
	touch $@

# The C parts (the controller's native cycle, the benchmark's bare loop): an ament_cmake package built
# the same way against the virtualenv prefix (flexmodal_native/CMakeLists.txt).
$(NATIVE_STAMP): $(NATIVE_SOURCES) $(REQ_STAMP)
	rm -rf $(NATIVE_DIR)
	AMENT_PREFIX_PATH=$(abspath $(VENV)) cmake -S flexmodal_native -B $(NATIVE_DIR)/build \
		-DCMAKE_PREFIX_PATH=$(abspath $(VENV)) -DCMAKE_INSTALL_PREFIX=$(NATIVE_PREFIX) -DBUILD_TESTING=OFF
	cmake --build $(NATIVE_DIR)/build -j $(JOBS)
	cmake --install $(NATIVE_DIR)/build
	mkdir -p $(STAMPS)
	touch $@

$(PKG_STAMP): $(PKG_SOURCES) $(REQ_STAMP)
	$(VENV_PY) -m pip install --no-deps --no-build-isolation -e .
	mkdir -p $(STAMPS)
	touch $@

# Editable installs skip setup.py's data_files and put console scripts in bin/ only, so the layout a
# ROS 2 install has is made here, as `colcon build --symlink-install` makes it: the ament index
# marker; share/flexmodal_ros/ as real directories holding one link per file (package.xml,
# launch/, urdf/, config/: ros2 launch walks share/<package> without following directory links);
# every console script linked into lib/flexmodal_ros/ (where `ros2 run` and launch_ros look).
# Rebuilt from scratch when a file is added to or removed from those directories.
$(LAYOUT_STAMP): $(PKG_STAMP) $(SHARE_DIRS) $(foreach d,$(SHARE_DIRS),$(wildcard $(d)/*))
	rm -rf $(PKG_SHARE) $(PKG_LIB)
	mkdir -p $(dir $(AMENT_MARKER)) $(PKG_SHARE) $(PKG_LIB)
	ln -sfn $(CURDIR)/resource/flexmodal_ros $(AMENT_MARKER)
	ln -s $(CURDIR)/package.xml $(PKG_SHARE)/package.xml
	for dir in $(SHARE_DIRS); do mkdir -p $(PKG_SHARE)/$$dir; \
		for file in $$dir/*; do if [ -f "$$file" ]; then ln -s $(CURDIR)/$$file $(PKG_SHARE)/$$file; fi; done; done
	for exe in $$($(VENV_PY) -c 'from importlib.metadata import distribution as d; \
		print(*sorted(e.name for e in d("flexmodal_ros").entry_points if e.group == "console_scripts"))'); do \
		test -x $(VENV)/bin/$$exe; ln -s ../../bin/$$exe $(PKG_LIB)/$$exe; done
	touch $@

# What `make test` runs: TESTS (default: the whole suite) with PYTEST_ARGS.
TESTS ?= test
# The second CI configuration (README, "Supported platforms"): every test that starts ROS nodes or
# uses ROS 2's Python API (marker `ros`, set by test/conftest.py) and the README examples (`readme`).
ROS_TEST_SELECTION := ros or readme
# The tests whose results depend on the NumPy/SciPy/LAPACK build (NumPy 2 / SciPy 1.12 API, LAPACK
# rounding, the LAPACK extension), run with Ubuntu 24.04's NumPy/SciPy by `make test-numerics`.
NUMERICS_TESTS := test/test_modes.py test/test_shaping.py test/test_links.py test/test_control.py \
	test/test_oma.py test/test_parametric.py test/test_erls.py test/test_modal.py

# pytest exit code 5 means "no tests collected": reported and kept as a failure.
test: setup
	. scripts/env.sh; python -c 'import numpy, scipy; print(f"make test: ROS 2 $(ROS_DISTRO), NumPy {numpy.__version__}, SciPy {scipy.__version__}")'; \
	rc=0; python -m pytest $(TESTS) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit code 5)" >&2; fi; \
	exit $$rc

# The whole suite but the reproductions marked slow (every published table also has a quick test).
test-quick: setup
	$(MAKE) test PYTEST_ARGS='-m "not slow" $(PYTEST_ARGS)'

# Jazzy: every ROS test and the README examples (.venv-jazzy; add NUMERICS=ubuntu2404 as CI does).
test-jazzy:
	$(MAKE) test ROS_DISTRO=jazzy PYTEST_ARGS='-m "$(ROS_TEST_SELECTION)" $(PYTEST_ARGS)'

# Ubuntu 24.04's NumPy 1.26.4 / SciPy 1.11.4 (NUMERICS=ubuntu2404) on NUMERICS_TESTS; the ROS
# distribution as given (CI: ROS_DISTRO=jazzy, whose Ubuntu 24.04 users have these numerics).
test-numerics:
	$(MAKE) test NUMERICS=ubuntu2404 TESTS='$(NUMERICS_TESTS)'

demo: setup
	. scripts/env.sh; python -m flexmodal_ros.nodes.demo

# The main job on the exported robot in MuJoCo (mujoco_simulator) instead of the built-in simulator,
# in lockstep (the tracking result does not depend on the machine's load; real-time figures printed).
demo-mujoco: setup
	. scripts/env.sh; python -m flexmodal_ros.nodes.demo --engine mujoco --lockstep --output-dir flexmodal_output/demo_mujoco

clean:
	rm -rf build build-* *.egg-info .pytest_cache
	find . -path './.venv*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# Every distribution's virtualenv.
distclean: clean
	rm -rf .venv .venv-*
