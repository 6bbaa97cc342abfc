"""Issue 29 item 3 (core and CLI side): the work of one request is bounded and checked before it
starts (polynomial eigenpairs: order / number of terms / symbolic work; link modes: mode count and
frame size), and long core work stops on a StopToken or a deadline."""
import subprocess
import sys
import time

import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.core.workers import Interrupted, StopToken
from flexmodal_ros.expansion import FlexibleJointSystem, expand
from flexmodal_ros.expansion.flexible_joint import PathSegmentSystem
from flexmodal_ros.expansion.live import PolynomialModalTracker
from flexmodal_ros.expansion.multiindex import MAX_ORDER, MAX_TERMS, addend_count, check_expansion_size
from flexmodal_ros.links import link_modes, load_link_arm, solve
from flexmodal_ros.links.fe import fe_frequencies
from flexmodal_ros.links.solve import MAX_FRAME_UNKNOWNS, MAX_MODES
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot


class CountingStop:
    """A stop token that says stop at its ``after``-th check (counts how often it was asked)."""

    def __init__(self, after):
        self.after, self.calls = after, 0

    def check(self):
        self.calls += 1
        if self.calls >= self.after:
            raise Interrupted("cancelled")


@pytest.fixture(scope="module")
def kuka():
    return load_robot("kuka_lwr4")


@pytest.mark.parametrize("robot, order, allowed", [
    ("kuka_lwr4", 6, 5),               # C(13, 6) = 1716 terms: took 14-16 s and 0.9 GB
    ("kuka_lwr4", 7, 5),               # 29 s, 1.7 GB in the issue
    ("kuka_lwr4", 2 ** 31 - 1, 5),     # never finished
    ("planar_2r", 16, 6),              # 153 terms but 17 s, 0.7 GB of symbolic expressions
    ("scompi", 7, 6),
])
def test_expansion_order_is_refused_before_any_work(robot, order, allowed):
    system = FlexibleJointSystem(load_robot(robot))
    with pytest.raises(InputError, match=rf"^order: {order} is too large, the largest order this system "
                                         rf"allows is {allowed} \("):
        expand(system, order=order)
    assert check_expansion_size(system, allowed) == allowed
    assert allowed <= MAX_ORDER and addend_count(len(system.parameter_names), allowed) <= MAX_TERMS


def test_the_live_tracker_and_the_cli_name_their_own_field(kuka):
    with pytest.raises(InputError, match=r"^expansion_order: 9 is too large"):
        PolynomialModalTracker(kuka, order=9)
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "expand", "--robot", "kuka_lwr4",
                           "--about", "0,0.5,0,1,0,0.5,0", "--order", "2147483647"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("flexmodal expand: error: --order: 2147483647 is too large, the largest "
                                  "order this system allows is 5")


def test_expansion_stops_on_its_token_and_deadline(kuka):
    # a wrench no other test uses: the symbolic maps are built afresh (not served from the cache)
    model = with_overrides(kuka, wrench=[0.0, 0.0, 1.2345, 0.0, 0.0, 0.0])
    system = FlexibleJointSystem(model)
    stop = CountingStop(after=3)
    with pytest.raises(Interrupted):
        expand(system, np.full(7, 0.2), order=4, stop=stop)
    assert stop.calls == 3                       # checked between the degrees, then stopped
    with pytest.raises(Interrupted, match="time limit"):
        expand(system, np.full(7, 0.2), order=2, deadline=time.monotonic() - 1.0)
    segment = PathSegmentSystem(with_overrides(kuka, wrench=[0.0, 0.0, 2.3456, 0.0, 0.0, 0.0]),
                                np.zeros(7), np.full(7, 0.4))
    with pytest.raises(Interrupted, match="time limit"):   # t = 6 takes ≥ 2 s; stopped after ~0.2 s
        expand(segment, order=6, deadline=time.monotonic() + 0.2)
    cancelled = StopToken()
    poly = expand(system, np.full(7, 0.2), order=1, stop=cancelled)     # a live token that never fires
    assert poly.order == 1


def test_link_modes_bounds_and_stop(monkeypatch):
    arm = load_link_arm("two_link_arm")
    with pytest.raises(InputError, match=rf"^num_modes: expected an integer from 1 to {MAX_MODES}, got 200"):
        link_modes(arm, [0.3, 0.3], 200)          # the old documented maximum: > 242 s, 3.45 GB
    with pytest.raises(InputError, match=rf"^--modes: expected an integer from 1 to {MAX_MODES}"):
        link_modes(arm, [0.3, 0.3], 51, field="--modes")
    monkeypatch.setattr(solve, "MAX_FRAME_UNKNOWNS", 60)   # as a longer chain of links reaches 240
    with pytest.raises(InputError, match=r"^num_modes: 40 modes of this arm need a frame of \d+ unknowns, "
                                         r"more than 60 \(ask for at most \d+ modes"):
        link_modes(arm, [0.3, 0.3], 40)
    monkeypatch.undo()
    assert solve.MAX_FRAME_UNKNOWNS == MAX_FRAME_UNKNOWNS
    stop = CountingStop(after=2)
    with pytest.raises(Interrupted):
        link_modes(arm, [0.3, 0.3], 30, stop=stop)
    with pytest.raises(Interrupted, match="time limit"):
        link_modes(arm, [0.3, 0.3], 10, deadline=time.monotonic() - 1.0)


def test_link_modes_at_the_bound_are_found():
    """30-50 modes used to end in 'chandrupatla: a bracket does not change sign' (det M(ω) has
    poles of its own) or 'omega: must be > 0' (a bracket from 0): such roots are polished on det K."""
    arm = load_link_arm("two_link_arm")
    q = [0.3, 0.3]
    many = link_modes(arm, q, MAX_MODES)
    assert many.num_modes == MAX_MODES and np.all(np.diff(many.frequencies_hz) > 0)
    few = link_modes(arm, q, 10)
    np.testing.assert_allclose(many.frequencies_hz[:10], few.frequencies_hz, rtol=1e-8)
    np.testing.assert_allclose(few.frequencies_hz[:4], fe_frequencies(arm, q, 4), rtol=2e-3)
    assert link_modes(arm, q, 30, "euler-bernoulli").num_modes == 30
