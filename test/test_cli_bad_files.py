"""Issue 29 item 7: every `flexmodal` subcommand, fed a bad file through each of its file options
(binary, non-UTF-8, empty, a 200 kB line, a directory, a FIFO, /dev/zero, a missing file; outputs
to /dev/full, a directory, a missing or non-directory parent, an unwritable place; an output
directory that is a file, ...), and the bad requests of the issue that are not files (loops
2^31 − 1, 20,000 waypoints, order 2^31 − 1, 200 link modes), ends with exit code 2, exactly one
line on stderr, no traceback, within 30 s. The cases are enumerated from the parser itself
(test/cli_bad_files.py), so a new subcommand or file option is covered or fails here."""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flexmodal_ros.cli import SUBCOMMAND_MODULES, build_parser

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import cli_bad_files  # noqa: E402

FILE_LIKE = re.compile(r"(^|_)(file|dir|path|output|out|csv|bag|urdf|params|data|store|record|trajectory|configs)($|_)")


def subparsers():
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_file_option_is_declared_and_every_subcommand_has_a_base_line(tmp_path):
    parsers = subparsers()
    assert len(parsers) >= len(SUBCOMMAND_MODULES)
    bases = cli_bad_files.base_commands(tmp_path, cli_bad_files.valid_files(tmp_path))
    assert set(bases) == set(parsers)
    undeclared = []
    for name, p in parsers.items():
        for action in p._actions:
            if getattr(action, "file_kind", None) or action.choices or action.nargs == 0 \
                    or action.type not in (None, str) or isinstance(action, argparse._HelpAction):
                continue
            if FILE_LIKE.search(action.dest) or action.metavar in ("FILE", "DIR", "PATH", "F", "OUT.yaml"):
                undeclared.append(f"{name} {action.option_strings or action.dest}")
        kinds = cli_bad_files.file_options(build_parser())[name]
        assert set(kinds) <= set(bases[name][1]), f"{name}: no valid value for {set(kinds) - set(bases[name][1])}"
    assert not undeclared, f"file options not declared with file_option(): {undeclared}"


@pytest.mark.slow
def test_bad_files_end_with_one_line_and_exit_code_2(tmp_path):
    proc = subprocess.run([sys.executable, str(HERE / "cli_bad_files.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) >= 300
    covered = {row["argv"][0] for row in rows}
    with_files = {name for name, kinds in cli_bad_files.file_options(build_parser()).items() if kinds}
    assert set(subparsers()) - with_files == {"doctor"}     # the one subcommand that reads and writes no file
    assert covered == with_files
    failures = []
    for row in rows:
        err = row["stderr"]
        if row["timed_out"] or row["code"] != 2 or err.count("\n") != 1 or "Traceback" in err \
                or not err.startswith(f"flexmodal {row['argv'][0]}: error: "):
            failures.append(f"{row['case']}: exit {row['code']}, {row['seconds']:.1f} s, "
                            f"stderr {err.strip()[-300:]!r}")
    assert not failures, f"{len(failures)} of {len(rows)} cases:\n" + "\n".join(failures)
    by_case = {row["case"]: row["stderr"] for row in rows}
    # what the messages say (a few of the cases)
    assert "not a regular file (a FIFO)" in by_case["oma --csv <fifo>"]
    assert "not a regular file (a character device)" in by_case["oma --csv <dev/zero>".replace("<dev", "</dev")]
    assert "not UTF-8 text" in by_case["oma --csv <non-utf8>"]
    assert "-o /dev/full: not a regular file (a character device)" in by_case["dh2urdf -o </dev/full>"]
    assert "-o" in by_case["shape -o <directory>"] and "a directory" in by_case["shape -o <directory>"]
    assert "--out-dir" in by_case["sweep --out-dir <existing file>"]
    assert "--loops: 2147483647" in by_case["constrained --loops <2147483647>"]
    assert "20000 waypoints, more than 1000" in by_case["shape --trajectory <20000 waypoints>"]
    assert "20000 waypoints, more than 1000" in by_case["simulate --trajectory <20000 waypoints>"]
