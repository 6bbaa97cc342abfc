"""Gazebo/MuJoCo export and the MuJoCo simulator (issue 16).

1. Export time per robot and format (``export_files``, median of repeats).
2. MuJoCo simulator real-time factor, kuka_lwr4, headless: simulated seconds per wall second of
   the mujoco_simulator's per-period work (MuJoCo steps at 1 kHz or 2 kHz, exported-state sample,
   serialized JointState) with the controller's commands held, against the built-in RK4 simulator
   (2 kHz) in the same run; target >= 5x real time at 1 kHz.
3. Controller compute per cycle under sim time (``--ros``): mujoco_simulator (lockstep) + the
   feedforward_pd_controller node (use_sim_time, link_state deflection) as processes, the thesis
   trajectory, the controller's own statistics (p50/p99 µs), against the same controller on the
   built-in simulator with the steady clock in the same run.

4. ``--fidelity``: the table of README "Gazebo and MuJoCo": how far each rotor-inertia and
   link-damping mapping (and Gazebo's valid-inertia requirement) moves the AMA, per bundled robot
   at 5 random configurations (N = 160 where the params give B only), and MuJoCo's MJCF.

Run: ``python benchmarks/bench_export.py [--repeats 5] [--ros] [--fidelity]``.
"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path


from _shared import add_quick_option, machine_load
from flexmodal_ros.export import export_files
from flexmodal_ros.export.mujoco_plant import MujocoRobot, MujocoSimulator
from flexmodal_ros.nodes.conversions import JointStateWriter
from flexmodal_ros.robot.registry import list_robots, load_robot
from flexmodal_ros.simulation import FlexibleJointPlant, Simulator, rest_state, thesis_trajectory

GEAR_RATIO = 160.0


def export_times(repeats):
    """{(robot, format): median export time [ms]}."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for robot in list_robots():
            model = load_robot(robot)
            for fmt in ("urdf", "sdf", "mjcf"):
                samples = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    export_files(model, fmt, Path(tmp) / f"{robot}.{fmt}", gear_ratio=GEAR_RATIO)
                    samples.append(1e3 * (time.perf_counter() - start))
                out[robot, fmt] = statistics.median(samples)
    return out


def real_time_factor(sim, model, seconds, period=1e-3):
    """Simulated / wall seconds of ``seconds`` of simulation in steps of ``period`` with a JointState each."""
    state = JointStateWriter(model)
    steps = int(round(seconds / period))
    start = time.perf_counter()
    for _ in range(steps):
        sim.advance(period)
        state(sim.t, *sim.sample(), *sim.efforts())
    return seconds / (time.perf_counter() - start)


def simulators(repeats, seconds=2.0):
    model = load_robot("kuka_lwr4")
    q0 = thesis_trajectory(model)[1][0]
    rows = {}
    for label, make in (
            ("mujoco_simulator 1 kHz", lambda: MujocoSimulator(MujocoRobot.from_model(model, timestep=1e-3), q0)),
            ("mujoco_simulator 2 kHz", lambda: MujocoSimulator(MujocoRobot.from_model(model, timestep=5e-4), q0)),
            ("built-in RK4 2 kHz", lambda: Simulator(FlexibleJointPlant(model, 5e-4), *rest_state(model, q0)))):
        rows[label] = statistics.median(real_time_factor(make(), model, seconds) for _ in range(repeats))
    return rows


def controller_under_sim_time():
    """Controller compute statistics [µs] over the thesis trajectory: (mujoco + sim time, built-in + steady)."""
    import os
    from flexmodal_ros.nodes.demo import SuiteClient
    from flexmodal_ros.nodes import bringup

    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", "43")
    model = load_robot("kuka_lwr4")
    times, positions = thesis_trajectory(model)
    out, logs = {}, tempfile.mkdtemp(prefix="flexmodal_bench_export_")
    for label, engine, simulator in (("mujoco, use_sim_time", "mujoco", "mujoco_simulator"),
                                     ("built-in, steady clock", "builtin", "flexible_joint_simulator")):
        params = {simulator: {"initial_positions": positions[0], "lockstep": True}}
        processes = bringup.start(model.name, params, log_dir=logs, engine=engine)
        client = None
        try:
            client = SuiteClient(model, name="flexmodal_bench_client", simulator=f"/{simulator}",
                                 link_state="deflection" if engine == "mujoco" else "absolute",
                                 alive=lambda: bringup.check_running(processes, engine))
            client.wait_for_status("hold", timeout=60.0)
            client.reset_controller_statistics()
            error = client.track(times, positions, settle=0.2, timeout=180.0).summary()["max_tracking_error_rad"]
            out[label] = dict(client.statistics(client.ctrl_stats), max_error=error)
        finally:
            if client is not None:
                client.close()
            bringup.stop(processes)
    return out


def fidelity_table():
    """Print :func:`flexmodal_ros.export.fidelity.gazebo_breakdown` + the MJCF check per robot."""
    from flexmodal_ros.export.fidelity import gazebo_breakdown, mujoco_fidelity, random_configurations

    print("AMA of each mapping vs the suite's (2.1), 5 random configurations (seed 1): max |df/f|, "
          "max |dzeta| [fraction], max |dlambda|/|lambda|")
    with tempfile.TemporaryDirectory() as tmp:
        for robot in list_robots():
            model = load_robot(robot)
            qs = random_configurations(model, 5, seed=1)
            rows = {"mjcf (armature, tendon)": mujoco_fidelity(model, MujocoRobot.from_model(model), qs)}
            rows.update(gazebo_breakdown(model, qs, tmp, gear_ratio=GEAR_RATIO))
            for label, f in rows.items():
                print(f"  {robot:<10} {label:<24} {f.max_freq_rel:10.2e} {f.max_damping_abs:10.2e} "
                      f"{f.max_eigenvalue_rel:10.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ros", action="store_true", help="also the controller under sim time (nodes)")
    parser.add_argument("--fidelity", action="store_true", help="only the mapping fidelity table")
    add_quick_option(parser)
    args = parser.parse_args()
    print(machine_load())
    if args.fidelity:
        return fidelity_table()
    if args.quick:
        args.repeats = 1
    print("export time per robot [ms] (median of %d):" % args.repeats)
    for (robot, fmt), ms in export_times(args.repeats).items():
        print(f"  {robot:<10} {fmt:<5} {ms:8.1f}")
    print("simulator real-time factor, kuka_lwr4, headless (simulated s per wall s; 1 ms periods with a "
          f"JointState each; median of {args.repeats}):")
    rows = simulators(args.repeats, 0.05 if args.quick else 2.0)
    for label, rtf in rows.items():
        print(f"  {label:<24} {rtf:6.1f}x")
    print(f"  mujoco 1 kHz / built-in: {rows['mujoco_simulator 1 kHz'] / rows['built-in RK4 2 kHz']:.1f}x")
    if args.ros:
        print("controller compute per cycle [µs], thesis trajectory, lockstep (node statistics):")
        for label, st in controller_under_sim_time().items():
            print(f"  {label:<24} p50 {st['compute_us_p50']:7.0f}  p99 {st['compute_us_p99']:7.0f}  "
                  f"max {st['compute_us_max']:7.0f}  cycles {st['compute_us_samples']}  "
                  f"max link error {st['max_error']:.2e} rad")


if __name__ == "__main__":
    main()
