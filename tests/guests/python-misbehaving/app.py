"""A Python handler that misbehaves on request, to test the host's sandbox
with a CPython guest: a resource holding a file named `loop` spins forever,
one holding `hog` keeps allocating until the memory cap stops it, one
holding `raise` raises an exception nobody catches; any other file set is
valid. Type `python-misbehaving`, group `python-misbehaving`.

Build: componentize-py -d ../../../wit -w handler componentize -p . app -o OUT.wasm
"""

import wit_world
from wit_world.imports.types import Description, Limits


def misbehave(files):
    names = {entry.path for entry in files}
    if "loop" in names:
        counter = 0
        while True:
            counter += 1
    if "hog" in names:
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    if "raise" in names:
        raise RuntimeError("misbehaving Python handler raised on purpose")


class WitWorld(wit_world.WitWorld):
    def describe(self):
        return Description(
            type_name="python-misbehaving",
            group="python-misbehaving",
            display_name="Misbehaving Python test handler",
            handler_version="0.1.0",
            limits=Limits(max_file_bytes=None, max_files=10, max_total_bytes=None),
        )

    def validate(self, resource, files):
        misbehave(files)
        return []

    def build_marker_metadata(self, resource, files):
        return [("name", resource.name)]

    def validate_file_mutation(self, path, op):
        return None

    def check(self, resource, files):
        misbehave(files)
        return ([], [("name", resource.name)])
