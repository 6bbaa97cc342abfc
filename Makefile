# flexmodal_ros developer entry points. `make setup` is idempotent: each step is keyed on a stamp
# file and reruns only when its inputs change (requirements.txt, interface sources, setup files).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := setup

PYTHON ?= python3.11
VENV := .venv
VENV_PY := $(VENV)/bin/python
JOBS ?= $(shell nproc)
PYTEST_ARGS ?=

# NumPy/SciPy: `pinned` (requirements.txt, the newest) or `ubuntu2404` (Ubuntu 24.04's 1.26.4 /
# 1.11.4: requirements-numerics-ubuntu2404.txt replaces those pins, scripts/numerics_requirements.py).
NUMERICS ?= pinned
NUMERICS_FILE := $(if $(filter-out pinned,$(NUMERICS)),requirements-numerics-$(NUMERICS).txt,)

IF_DIR := build/interfaces
IF_PREFIX := $(abspath $(IF_DIR)/install)
STAMPS := build/stamps
# Lives inside .venv so that a new virtualenv reinstalls the requirements; one per NUMERICS choice.
REQ_STAMP := $(VENV)/.flexmodal-requirements-$(NUMERICS).stamp
IF_STAMP := $(STAMPS)/interfaces.stamp
PKG_STAMP := $(STAMPS)/flexmodal_ros.stamp

IF_SOURCES := flexmodal_interfaces/CMakeLists.txt flexmodal_interfaces/package.xml \
	flexmodal_interfaces/msg flexmodal_interfaces/srv flexmodal_interfaces/action \
	$(wildcard flexmodal_interfaces/msg/*.msg flexmodal_interfaces/srv/*.srv flexmodal_interfaces/action/*.action)
PKG_SOURCES := setup.py setup.cfg package.xml resource/flexmodal_ros Makefile \
	flexmodal_ros/linalg/lapack_kernel.pyx flexmodal_ros/linalg/lapack_batch.c flexmodal_ros/linalg/lapack_batch.h
PKG_SHARE := $(VENV)/share/flexmodal_ros
PKG_LIB := $(VENV)/lib/flexmodal_ros
LAYOUT_STAMP := $(STAMPS)/ros_layout.stamp
SHARE_DIRS := launch urdf config
AMENT_MARKER := $(VENV)/share/ament_index/resource_index/packages/flexmodal_ros

export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup test test-quick demo demo-mujoco clean distclean

setup: $(REQ_STAMP) $(IF_STAMP) $(PKG_STAMP) $(LAYOUT_STAMP)

$(VENV_PY):
	$(PYTHON) -m venv $(VENV)

$(REQ_STAMP): requirements.txt $(NUMERICS_FILE) | $(VENV_PY)
ifeq ($(NUMERICS_FILE),)
	$(VENV_PY) -m pip install -r requirements.txt
else
	mkdir -p build
	$(VENV_PY) scripts/numerics_requirements.py requirements.txt $(NUMERICS_FILE) build/requirements-$(NUMERICS)
	$(VENV_PY) -m pip install -r build/requirements-$(NUMERICS).txt
	$(VENV_PY) -m pip install --no-deps -r build/requirements-$(NUMERICS)-no-deps.txt
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

# pytest exit code 5 means "no tests collected": reported and kept as a failure.
test: setup
	. scripts/env.sh; rc=0; python -m pytest test $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit code 5)" >&2; fi; \
	exit $$rc

# The whole suite but the reproductions marked slow (every published table also has a quick test).
test-quick: setup
	$(MAKE) test PYTEST_ARGS='-m "not slow" $(PYTEST_ARGS)'

demo: setup
	. scripts/env.sh; python -m flexmodal_ros.nodes.demo

# The main job on the exported robot in MuJoCo (mujoco_simulator) instead of the built-in simulator,
# in lockstep (the tracking result does not depend on the machine's load; real-time figures printed).
demo-mujoco: setup
	. scripts/env.sh; python -m flexmodal_ros.nodes.demo --engine mujoco --lockstep --output-dir flexmodal_output/demo_mujoco

clean:
	rm -rf build *.egg-info .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
