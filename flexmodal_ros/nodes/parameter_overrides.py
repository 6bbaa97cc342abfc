"""Parameters given to a node that it does not have: an error naming each, never silently ignored.

rclpy keeps an override (``-p name:=value``, a node's section of a ``--params-file``) whose name
the node never declares, and the node runs on its default: a misspelt gain is a silent change of
behaviour. :func:`unknown_parameters` lists the overrides meant for this node whose names it has
not declared once it is built:

- ``-p name:=value`` / ``--param``, unprefixed or prefixed with this node's name
  (``-p flexible_joint_simulator:rate_hz:=500``);
- the parameters of a ``--params-file`` section that names this node: its fully qualified name,
  its name alone, or a pattern with ``*`` (one namespace level) or ``**`` (any number) other than
  the bare ``/**``. What a ``/**`` section gives to every node is not checked: one file commonly
  serves several nodes, each taking its own.

A parameter a node declares only with some settings (e.g. a shaping parameter with shaping off)
counts as unknown under the others: it would be ignored there.
"""
from __future__ import annotations

import difflib

PARAM_FLAGS = ("-p", "--param")
PARAMS_FILE_FLAG = "--params-file"


def unknown_parameters(node, argv) -> list[str]:
    """One text per override in ``argv`` (the process's command line, with ``--ros-args``) meant
    for ``node`` whose name it has not declared, naming the parameter as written and where it was
    given, with the closest declared names."""
    given = _given_parameters(list(argv or ()), node.get_name(), node.get_fully_qualified_name())
    declared = node.list_parameters([], 0).names
    out = []
    for name, where in given:
        if node.has_parameter(name):
            continue
        close = difflib.get_close_matches(name, declared, n=2)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        out.append(f"parameter {name!r} ({where}) is not a parameter of this node{hint}")
    return out


def _given_parameters(argv, name, fqn):
    """[(parameter name, where)] of the overrides in ``argv`` meant for the node ``name``/``fqn``."""
    given = []
    for args in _ros_argument_groups(argv):
        i = 0
        while i < len(args):
            flag = args[i]
            value = args[i + 1] if i + 1 < len(args) else ""
            if flag in PARAM_FLAGS and ":=" in value:
                target, _, param = value.split(":=", 1)[0].rpartition(":")
                if target in ("", name):
                    given.append((param, f"{flag} {value}"))
                i += 2
            elif flag == PARAMS_FILE_FLAG:
                given += [(param, f"{value}, section {key!r}") for key, param in _file_parameters(value, fqn)]
                i += 2
            else:
                i += 1
    return given


def _ros_argument_groups(argv):
    """The arguments between each ``--ros-args`` and the next ``--`` (or the end)."""
    groups, current = [], None
    for arg in argv:
        if arg == "--ros-args":
            current = []
            groups.append(current)
        elif arg == "--":
            current = None
        elif current is not None:
            current.append(arg)
    return groups


def _file_parameters(path, fqn):
    """[(section key, parameter name)] of the sections of the YAML parameter file ``path`` that
    name the node ``fqn`` (module docstring). A file that does not read as one is left to rcl,
    which has refused it already."""
    import yaml       # deferred: only with --params-file

    try:
        with open(path) as f:
            content = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return []
    out = []
    for key, section in (content.items() if isinstance(content, dict) else ()):
        if not isinstance(key, str) or key.strip() == "/**" or not _names_node(key, fqn):
            continue
        params = section.get("ros__parameters") if isinstance(section, dict) else None
        if isinstance(params, dict):
            out += [(key, name) for name in _flat_names(params)]
    return out


def _names_node(pattern, fqn):
    """Whether the section key ``pattern`` (``/ns/name``, ``name``, ``/**/name``, ``/*/name``)
    matches the fully qualified node name ``fqn``."""
    return _match(pattern.strip("/").split("/"), fqn.strip("/").split("/"))


def _match(pattern, tokens):
    if not pattern:
        return not tokens
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, tokens[i:]) for i in range(len(tokens) + 1))
    return bool(tokens) and head in ("*", tokens[0]) and _match(rest, tokens[1:])


def _flat_names(params, prefix=""):
    """Parameter names of a nested ``ros__parameters`` mapping (levels joined with '.')."""
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat_names(value, f"{name}.")
        else:
            yield name
