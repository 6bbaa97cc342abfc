"""Hostile service requests for the nodes' fuzz tests (issue 29 item 1).

:class:`RequestFuzzer` builds requests of any flexmodal_interfaces service type from its field
types (``get_fields_and_field_types``): numbers among NaN, ±inf, ±1e308, −0, subnormals, huge
integers as doubles, random values; integers at their type's edges; strings that are empty, blank,
invalid names, non-ASCII, path escapes, long; sequences of bounded length (at most
``MAX_SEQUENCE``) that are empty, one short, one long, or random. Half the requests mutate one to
three fields of a valid ``baseline`` request (so that the hostile value reaches deep code), the
others are random in every field. Deterministic for a given seed.
"""
import math
import random

MAX_SEQUENCE = 64          # longest sequence sent (bounded request sizes)

DOUBLES = [math.nan, math.inf, -math.inf, 1e308, -1e308, -0.0, 0.0, 5e-324, 1e-300, 1e200, -1e200,
           float(2 ** 53 + 1), float(2 ** 63), 1.0, -1.0, 0.5, 3.0, 100.0, 1e4, -1e4]
UNSIGNED = {"uint8": 2 ** 8 - 1, "uint16": 2 ** 16 - 1, "uint32": 2 ** 32 - 1, "uint64": 2 ** 64 - 1}
SIGNED = {"int8": 2 ** 7, "int16": 2 ** 15, "int32": 2 ** 31, "int64": 2 ** 63}
STRINGS = ["", " ", "bad name!", "trailing ", "ü", "ö漢字🙂", "..", "../../outside", "/tmp/flexmodal_fuzz_canary/x",
           "/dev/null/x", "~", "~/x", "a" * 300, "x" * 5000, "{node}", "$HOME", "%s%n", "joint_1", "joint_9",
           "joint_1_motor", "NaN", "-1", "1e308", "\t", "a/b/c", "//", "0"]


class RequestFuzzer:
    """Random hostile requests of ``srv_type`` (a service type); ``baseline``: a function returning
    a valid request; ``names``: strings likely to be meaningful for this service (joint names,
    methods, models...) mixed into the string values."""

    def __init__(self, srv_type, baseline, seed=0, names=()):
        self.request_type = srv_type.Request
        self.fields = self.request_type.get_fields_and_field_types()
        self.baseline = baseline
        self.rng = random.Random(seed)
        self.strings = STRINGS + list(names)

    def __call__(self):
        rng = self.rng
        if rng.random() < 0.5:
            request = self.baseline()
            for name in rng.sample(sorted(self.fields), k=min(len(self.fields), rng.randint(1, 3))):
                setattr(request, name, self.value(self.fields[name]))
            return request
        request = self.request_type()
        for name, kind in self.fields.items():
            setattr(request, name, self.value(kind))
        return request

    def value(self, kind):
        rng = self.rng
        if kind.startswith("sequence<"):
            inner = kind[len("sequence<"):-1].split(",")[0]
            length = rng.choice([0, 1, 2, 3, 5, 6, 7, 12, rng.randint(0, MAX_SEQUENCE)])
            return [self.value(inner) for _ in range(length)]
        if kind.endswith("]"):                      # fixed-size array: the size is the type's
            inner, size = kind[:-1].split("[")
            return [self.value(inner) for _ in range(int(size))]
        if kind in ("double", "float"):
            return self._double()
        if kind in UNSIGNED:
            top = UNSIGNED[kind]
            return rng.choice([0, 1, 2, 3, 4, 6, 10, 12, 40, 41, 200, 201, 1000, 10001, top // 2, top,
                               rng.randint(0, min(top, 100))])
        if kind in SIGNED:
            top = SIGNED[kind]
            return rng.choice([0, 1, -1, 2, 5, -top, top - 1, rng.randint(-100, 100)])
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "string":
            return rng.choice(self.strings)
        raise ValueError(f"no fuzz values for field type {kind}")

    def _double(self):
        rng = self.rng
        if rng.random() < 0.6:
            return rng.choice(DOUBLES)
        return rng.gauss(0.0, rng.choice([1.0, 10.0, 1e3, 1e9]))
