"""Options shared by ``flexmodal sweep`` and ``flexmodal identify`` for Dask and out-of-core maps
(:mod:`flexmodal_ros.distributed`)."""
from ..distributed.executors import DEFAULT_TIMEOUT_S, parse_scheduler
from ..core.errors import InputError
from ..core.validation import output_directory, write_output
from .options import file_option
from ..distributed import plot_store, sweep_to_store

MAX_CROSSINGS_SHOWN = 10


def add_scheduler_options(parser):
    """--scheduler tcp://HOST:PORT|local:N, --scheduler-timeout S."""
    group = parser.add_argument_group("Dask")
    group.add_argument("--scheduler", help="run on Dask: tcp://HOST:PORT of a running `dask scheduler`, "
                       "or local:N for N local worker processes on 127.0.0.1 (default: local threads)")
    group.add_argument("--scheduler-timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help=f"seconds to wait for the scheduler and a first worker (default {DEFAULT_TIMEOUT_S:g})")
    return group


def add_store_options(parser):
    """--store PATH, --chunk-size N, --store-shapes (``flexmodal sweep``)."""
    group = add_scheduler_options(parser)
    file_option(group, "--store", kind="output_dir", metavar="PATH", help="stream the map to a Zarr store (out of "
                "core, resumable; read with xarray.open_zarr(PATH, consolidated=False))")
    group.add_argument("--chunk-size", type=int, help="configurations per task (default 4096, or the "
                       "store's when resuming)")
    group.add_argument("--store-shapes", action="store_true",
                       help="also store every mode shape (m x 2n x 2n complex)")


def check_scheduler(args):
    """Validate --scheduler before any work (InputError with a one-line reason)."""
    if args.scheduler is not None:
        parse_scheduler(args.scheduler)
    if not args.scheduler_timeout > 0:
        raise InputError(f"--scheduler-timeout: must be > 0, got {args.scheduler_timeout}")


def run_store_sweep(args, model, configurations, print_json):
    """``flexmodal sweep --store``: the map streamed to the store, summary and PNG from the store."""

    check_scheduler(args)
    run = sweep_to_store(model, configurations, args.store, scheduler=args.scheduler,
                         track=not args.no_track, store_shapes=args.store_shapes,
                         chunk_size=args.chunk_size, workers=args.workers,
                         progress=not args.no_progress, timeout=args.scheduler_timeout)
    files = [str(run.path)]
    if not args.no_plot:
        out = output_directory(args.out_dir, "--out-dir")
        files.append(str(write_output(out / "modal_map.png", "--out-dir",
                                      lambda path: plot_store(run.path, path, f"{model.name}: modal map"))))
    s = run.summary
    summary = {"robot": model.name, "store": str(run.path), "chunks_computed": run.computed,
               "chunks_resumed": run.resumed, **s, "files": files}
    if args.json:
        print_json(summary)
        return 0
    f, z = s["frequency_range_hz"], s["damping_range"]
    print(f"{model.name}: {s['num_configurations']} configurations ({run.computed} chunks computed, "
          f"{run.resumed} resumed), {s['num_modes_range'][1]} modes, f {f[0]:.4f}..{f[1]:.4f} Hz, "
          f"zeta {100 * z[0]:.4f}..{100 * z[1]:.4f} %, "
          f"{'all stable' if s['all_stable'] else 'SOME NOT STABLE: ' + str(s['stability_counts'])}")
    for c in s["crossings"][:MAX_CROSSINGS_SHOWN]:
        print(f"  {c}")
    if s["num_crossings"] > len(s["crossings"]):
        print(f"  ... {s['num_crossings'] - len(s['crossings'])} more mode crossings "
              f"(store arrays crossing_configurations, crossing_modes)")
    print("wrote " + ", ".join(files))
    return 0
