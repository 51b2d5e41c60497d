"""The registry of resource kinds (capi/kinds.json) against what the layers do.

The generated files must match the registry (ci/gen_kinds.py --check), and the
registry must match the contract it restates: the kind enum, the options
structs and the defaults their tether_*_options_init writes, the Python
classes and their keywords, and the spec parser's kinds and parameters.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether import _kinds, _resources
from tether._ffi import ffi, lib

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "ci" / "gen_kinds.py"
SPEC_KINDS = [k for k in _kinds.KINDS if k.spec]


def test_the_generated_files_match_the_registry():
    if not GEN.exists():
        pytest.skip("no source tree (ci/gen_kinds.py) next to these tests")
    done = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_installed_registry_module_is_the_sources():
    # The package's _kinds.py is generated and committed; the one installed must be today's.
    registry = ROOT / "capi" / "kinds.json"
    if not registry.exists():
        pytest.skip("no source tree next to these tests")
    names = [k["name"] for k in json.loads(registry.read_text(encoding="utf-8"))["kinds"]]
    assert [k.name for k in _kinds.KINDS] == names


def test_every_kind_of_the_headers_is_in_the_registry():
    enum = {name[len("TETHER_RESOURCE_KIND_"):]: getattr(lib, name)
            for name in dir(lib) if name.startswith("TETHER_RESOURCE_KIND_")}
    assert {k.name.upper(): k.kind for k in _kinds.KINDS} == enum


@pytest.mark.parametrize("kind", [k for k in _kinds.KINDS if k.options], ids=lambda k: k.name)
def test_the_registry_defaults_are_what_options_init_writes(kind):
    ctype = kind.options
    fields = [name for name, _ in ffi.typeof(ctype).fields if name != "struct_size"]
    assert [p.name for p in kind.params] == fields, "the registry lists every field, in struct order"
    opts = ffi.new(ctype + "*")
    init = getattr(lib, ctype[:-len("_t")] + "_init")
    assert init(opts, ffi.sizeof(ctype)) == lib.TETHER_OK
    for p in kind.params:
        value = getattr(opts, p.name)
        if p.default is None:
            assert value == ffi.NULL, p.name
        else:
            assert int(value) == int(p.default), p.name


@pytest.mark.parametrize("kind", [k for k in _kinds.KINDS if k.allocator], ids=lambda k: k.name)
def test_each_kind_has_its_python_class(kind):
    cls = getattr(tether, kind.python)
    assert _resources._CLASSES[kind.kind] is cls
    sig = inspect.signature(cls.__init__)
    for p in kind.params:
        if not p.spec:
            continue  # made of functions: the constructors take Python callables instead
        assert p.name in sig.parameters, f"{kind.python}() lacks {p.name}="
        if p.alias and p.python_alias:
            assert p.alias in sig.parameters, f"{kind.python}() lacks the alias {p.alias}="
        default = sig.parameters[p.name].default
        if default not in (None, inspect.Parameter.empty) and p.default is not None:
            # A default the signature shows is the registry's (sizes may be written "1 MiB").
            shown = tether.parse_size(default) if p.unit == "size" else default
            assert shown == p.default, p.name


def test_python_signature_defaults_are_the_registry_constants():
    sig = inspect.signature(tether.FixedSizeResource.__init__).parameters
    assert sig["block_size"].default == _kinds.FIXED_SIZE_BLOCK_SIZE
    assert tether.parse_size(_kinds.FIXED_SIZE_BLOCK_SIZE) == 1 << 20
    assert sig["blocks_to_preallocate"].default == _kinds.FIXED_SIZE_BLOCKS_TO_PREALLOCATE


def test_the_spec_parser_knows_exactly_the_registry_kinds():
    with pytest.raises(tether.InvalidArgumentError) as e:
        tether.from_spec("nonesuch")
    assert f"(known: {', '.join(k.name for k in SPEC_KINDS)})" in str(e.value)
    for k in _kinds.KINDS:
        if not k.spec:
            with pytest.raises(tether.InvalidArgumentError, match="unknown resource"):
                tether.from_spec(k.name)


@pytest.mark.parametrize("kind", SPEC_KINDS, ids=lambda k: k.name)
def test_the_spec_parser_takes_the_registry_parameters(kind):
    # An unknown parameter is refused before anything is built (no device needed);
    # the message lists the parameters the parser's table has.
    with pytest.raises(tether.InvalidArgumentError) as e:
        tether.from_spec(f"{kind.name}(nonesuch=1)")
    positional = {"upstream": ["upstream"], "device": ["device"], "leaf": []}[kind.shape]
    names = positional + [p.name for p in kind.params if p.spec] + (["bins"] if kind.bins else [])
    assert f"(parameters: {', '.join(names) or 'none'})" in str(e.value)


@pytest.mark.parametrize("kind", [k for k in SPEC_KINDS if k.memory == "upstream"], ids=lambda k: k.name)
def test_spec_kinds_build_over_the_host_with_their_registry_name(kind, tmp_path):
    extra = f", path='{tmp_path / 'log'}'" if kind.name == "logging" else ""
    try:
        r = tether.from_spec(f"{kind.name}(host{extra})")
    except tether.NotSupportedError:
        pytest.skip(f"{kind.name} over host memory is not supported here")
    try:
        assert type(r).__name__ == kind.python
        assert r.name == kind.name and r.kind == kind.kind
        assert r.spec.startswith(f"{kind.name}(host")
        again = tether.from_spec(r.spec)
        assert again.spec == r.spec
        again.close()
    finally:
        r.close()


def test_kinds_users_do_not_create_have_no_class_and_no_spec():
    # ipc: the mapping behind a buffer from tether.import_ipc; it shows as a plain Resource.
    others = [k for k in _kinds.KINDS if not k.allocator]
    assert [k.name for k in others] == ["ipc"]
    for k in others:
        assert k.python is None and not k.spec and k.kind not in _resources._CLASSES
