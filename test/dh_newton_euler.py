"""Independent numeric recursive Newton-Euler on a standard-DH table (thesis Alg. 1, notes_003 §5).

Test-only reference: it shares nothing with Pinocchio or the URDF generator except the DH rows.
"""
import numpy as np

from flexmodal_ros.robot.dh import dh_transform


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def dh_rnea(links, q, qd, qdd, g0):
    """Joint forces tau(q, qd, qdd) of a serial robot given by DHLink rows, gravity g0 in frame 0."""
    n = len(links)
    z0 = np.array([0.0, 0.0, 1.0])
    w, wd, a = np.zeros(3), np.zeros(3), -np.asarray(g0, dtype=float)
    R, ps, W, WD, A, OM = [], [], [], [], [], []
    for i, link in enumerate(links):
        T = dh_transform(link, q[i])
        Ri = T[:3, :3]
        xi = 0.0 if link.prismatic else 1.0
        zi = Ri.T @ z0
        w_new = Ri.T @ (w + xi * qd[i] * z0)
        wd = Ri.T @ (wd + xi * (qdd[i] * z0 + qd[i] * np.cross(w, z0)))
        w = w_new
        Om = _skew(wd) + _skew(w) @ _skew(w)
        p = Ri.T @ T[:3, 3]
        a = Ri.T @ a + Om @ p + (1.0 - xi) * (qdd[i] * zi + 2.0 * qd[i] * np.cross(w, zi))
        R.append(Ri); ps.append(p); W.append(w); WD.append(wd); A.append(a); OM.append(Om)
    f, nm, tau = np.zeros(3), np.zeros(3), np.zeros(n)
    R.append(np.eye(3))
    for i in reversed(range(n)):
        link = links[i]
        pc, m = link.com, link.mass
        Ii = link.inertia - m * _skew(pc) @ _skew(pc)
        f = R[i + 1] @ f + m * (A[i] + OM[i] @ pc)
        nm = (R[i + 1] @ nm + np.cross(ps[i], f) + m * np.cross(pc, A[i]) + Ii @ WD[i]
              + np.cross(W[i], Ii @ W[i]))
        zi = R[i].T @ np.array([0.0, 0.0, 1.0])
        tau[i] = zi @ f if link.prismatic else zi @ nm
    return tau
