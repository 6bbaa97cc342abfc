"""The ``flexmodal`` command line: one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)``, which registers its parser(s) with
``set_defaults(func=run)``; ``run(args)`` returns the exit code. Errors of the package
(:class:`~flexmodal_ros.core.errors.FlexmodalError`) become a one-line message and exit code 2.
"""
import argparse
import importlib
import os
import re
import sys

from ..core.errors import FlexmodalError

SUBCOMMAND_MODULES = ("describe", "modal", "identify", "codegen", "simulate", "export", "expand", "links",
                      "constrained", "oma", "shape", "doctor")


_NEGATIVE_VALUE = re.compile(r"^-\.?\d")


def attach_negative_values(argv):
    """``--q -0.3,1.2`` -> ``--q=-0.3,1.2``: argparse would take ``-0.3,1.2`` for an option."""
    out = []
    for token in argv:
        if out and _NEGATIVE_VALUE.match(token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def build_parser():
    parser = argparse.ArgumentParser(prog="flexmodal", description="Modal analysis, identification and "
                                     "control of flexible-joint robots.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    return parser


def main(argv=None):
    args = build_parser().parse_args(attach_negative_values(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except FlexmodalError as exc:
        print(f"flexmodal {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"flexmodal {args.command}: error: out of memory (make the problem smaller)", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which exited early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
