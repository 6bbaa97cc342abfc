"""Requirement files for `make setup NUMERICS=<name>`: requirements.txt with the pins of an override
file (requirements-numerics-<name>.txt) replacing those of the same name, split into what pip
resolves (OUT.txt) and what it installs with --no-deps (OUT-no-deps.txt: the names listed on
`# no-deps:` lines of the override file, at the versions of the merged pins).

Usage: python scripts/numerics_requirements.py requirements.txt OVERRIDES OUT
"""
import re
import sys


def name_of(line):
    """Normalized project name of a `name==version` line, or None for comments and blanks."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==", line)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else None


def main(base, overrides, out):
    replaced, no_deps = {}, set()
    for line in open(overrides, encoding="utf-8"):
        if line.strip().startswith("# no-deps:"):
            no_deps.update(re.sub(r"[-_.]+", "-", n).lower() for n in line.split(":", 1)[1].split())
        elif name_of(line):
            replaced[name_of(line)] = line.split("#")[0].strip()
    resolved, separate, seen = [], [], set()
    for line in open(base, encoding="utf-8"):
        name = name_of(line)
        if name is None:
            continue
        seen.add(name)
        pin = replaced.get(name, line.split("#")[0].strip())
        (separate if name in no_deps else resolved).append(pin)
    missing = (set(replaced) | no_deps) - seen
    if missing:
        sys.exit(f"{overrides}: {', '.join(sorted(missing))} not pinned in {base}")
    with open(f"{out}.txt", "w", encoding="utf-8") as fh:
        fh.write("\n".join(resolved) + "\n")
    with open(f"{out}-no-deps.txt", "w", encoding="utf-8") as fh:
        fh.write("\n".join(separate) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
