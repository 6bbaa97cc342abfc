"""Every fallback says so, once (issue 28, deliverable 4): a FallbackWarning naming what is
unavailable, why, what runs instead and its cost, once per process; no silent environment
fallback in the package source."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.core.fallbacks import FallbackWarning, warn_fallback

PACKAGE = Path(__file__).resolve().parent.parent / "flexmodal_ros"


def test_a_fallback_warns_once_with_what_why_instead_and_cost():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = warn_fallback("test_fallbacks", "the fast path", "no compiler", "the slow path runs", "3x slower")
        second = warn_fallback("test_fallbacks", "the fast path", "no compiler", "the slow path runs", "3x slower")
        other = warn_fallback("test_fallbacks", "another path", "absent", "a copy runs", "none")
    assert (first, second, other) == (True, False, True)
    assert [w.category for w in caught] == [FallbackWarning, FallbackWarning]
    assert str(caught[0].message) == ("test_fallbacks: the fast path is unavailable (no compiler); "
                                      "the slow path runs — cost: 3x slower")
    assert issubclass(FallbackWarning, RuntimeWarning)


def test_gravity_derivative_of_a_model_with_mimic_joints_falls_back_once_and_says_so(tmp_path):
    """Pinocchio's analytic dg/dq refuses mimic joints (a gear-coupled rotor export): central
    differences instead (their accuracy: test_export), one FallbackWarning for any number of calls."""
    import pinocchio as pin

    from flexmodal_ros.export.fidelity import _gravity_stiffness
    from flexmodal_ros.export.gazebo import write_urdf
    from flexmodal_ros.export.tree import build_export
    from flexmodal_ros.robot.registry import load_robot

    path = tmp_path / "gear.urdf"
    model = load_robot("planar_2r")
    path.write_text(write_urdf(build_export(model, "gear", "elastic", 50.0), "c.yaml"))
    mimic = pin.buildModelFromUrdf(str(path), mimic=True)
    mimic.gravity = pin.Motion(np.array(model.gravity), np.zeros(3))
    x = np.random.default_rng(3).uniform(-1.0, 1.0, mimic.nq)
    with pytest.raises(Exception, match="Mimic"):
        pin.computeGeneralizedGravityDerivatives(mimic, mimic.createData(), x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        K = [_gravity_stiffness(mimic, mimic.createData(), x) for _ in range(3)]
    ours = [w for w in caught if issubclass(w.category, FallbackWarning) and "export.fidelity" in str(w.message)]
    assert len(ours) <= 1                         # at most once per process (an earlier test may have warned)
    if ours:
        assert "mimic" in str(ours[0].message) and "central differences" in str(ours[0].message)
    assert np.all(np.isfinite(K[0])) and np.abs(K[0]).max() > 0
    np.testing.assert_array_equal(K[1], K[0])


_ENVIRONMENT_ERRORS = ("ImportError", "ModuleNotFoundError", "OSError", "AttributeError", "Exception",
                       "BaseException", "BuildError", "FileNotFoundError", "PermissionError")
_SILENT = re.compile(r"^[ \t]*except\b(?P<caught>[^\n]*):[ \t]*(#[^\n]*)?\n([ \t]*#[^\n]*\n)*"
                     r"[ \t]*(pass|return None|return|continue)[ \t]*(#[^\n]*)?$", re.M)


def test_no_silent_environment_fallback_in_the_package():
    """No ``except ImportError/OSError/...:`` followed directly by pass / return None / continue:
    such a branch must say what it does instead (warn_fallback, a log line or an error)."""
    silent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in _SILENT.finditer(text):
            if any(re.search(rf"\b{name}\b", match.group("caught")) for name in _ENVIRONMENT_ERRORS):
                silent.append(f"{path.relative_to(PACKAGE.parent)}:{text[:match.start()].count(chr(10)) + 1}")
    assert silent == []
