"""gen-check: the cdef is generated from the public headers and covers the whole ABI.

The shipped cdef (tether/_cdef.h) must equal a fresh generation from the
headers the package ships and from the source tree's headers, and every
tether_* function libtether exports must be declared in it (and callable
through the extension), and vice versa.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import tether
from script_support import REPO, load_script
from tether._ffi import lib

GENERATOR = REPO / "python" / "cdefgen.py"
SHIPPED = Path(tether.__file__).with_name("_cdef.h")


@pytest.fixture(scope="module")
def cdefgen():
    return load_script(GENERATOR, "cdefgen")


def exported_functions() -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", tether.get_library()], capture_output=True,
                         text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            names.add(parts[2].split("@")[0])
    return names


def test_shipped_cdef_matches_the_shipped_headers(cdefgen):
    assert SHIPPED.read_text() == cdefgen.generate(tether.get_include())


def test_shipped_cdef_matches_the_source_headers(cdefgen):
    # Fails when capi/include changed since the package was built: reinstall it.
    assert SHIPPED.read_text() == cdefgen.generate(REPO / "capi" / "include"), \
        "the installed package was built from other headers; run 'pip install .' again"


# libtether's entry points for the package's own extension (the quick paths
# that run with the GIL held): exported, but not public - declared only in
# capi/src/tether_internal.h, never in the cdef.
INTERNAL_HEADER = REPO / "capi" / "src" / "tether_internal.h"


def internal_functions() -> set[str]:
    import re
    return set(re.findall(r"TETHER_API\s+\w+\s*\*?\s*(tether_internal_\w+)\s*\(", INTERNAL_HEADER.read_text()))


def test_internal_entry_points_are_exported_and_only_those(cdefgen):
    exported = exported_functions()
    internal = internal_functions()
    assert internal and internal <= exported
    assert {n for n in exported if n.startswith("tether_internal_")} == internal
    assert not any(hasattr(lib, n) for n in internal)  # not callable from Python


def test_every_exported_function_is_declared_and_callable(cdefgen):
    exported = exported_functions() - internal_functions()
    assert exported and all(n.startswith("tether_") for n in exported), sorted(exported)
    declared = cdefgen.declared_functions(SHIPPED.read_text())
    assert exported - declared == set(), "exported by libtether but missing from the cdef"
    assert declared - exported == set(), "declared in the headers but not exported by libtether"
    assert {n for n in exported if not hasattr(lib, n)} == set()


def test_integer_macros_are_constants(cdefgen):
    text = SHIPPED.read_text()
    assert "#define TETHER_ABI_VERSION ..." in text
    assert lib.TETHER_DEVICE_HOST == -1 and lib.TETHER_DEFAULT_ALIGNMENT == 256
    # Brace initialisers are not constants and must not appear.
    assert "TETHER_POOL_OPTIONS_INIT" not in text and "{ sizeof" not in text
    assert "TETHER_API" not in text and "#include" not in text and "extern" not in text


def test_generator_refuses_platform_conditionals(cdefgen, tmp_path):
    inc = tmp_path / "tether"
    inc.mkdir()
    (inc / "tether.h").write_text('#include "tether/a.h"\n')
    (inc / "a.h").write_text("#ifndef A_H\n#define A_H\n#ifdef __linux__\nint tether_x(void);\n#endif\n#endif\n")
    with pytest.raises(cdefgen.CdefError, match="conditional"):
        cdefgen.generate(tmp_path)


def test_generator_translation_rules(cdefgen, tmp_path):
    inc = tmp_path / "tether"
    inc.mkdir()
    (inc / "tether.h").write_text('#ifndef T_H\n#define T_H\n#include "tether/b.h"\n#include "tether/a.h"\n#endif\n')
    (inc / "a.h").write_text(
        "#ifndef TETHER_A_H\n#define TETHER_A_H\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
        "/** doc */\n#define TETHER_A (1u << 4)\n#define TETHER_S \"text\"\n#define TETHER_F(x) ((x) + 1)\n"
        "#define TETHER_A_INIT { sizeof(int), 0 }\n#define TETHER_LONG \\\n  (-2)\n"
        "TETHER_API int tether_a(int x); // trailing\n"
        "#ifdef __cplusplus\n}\n#endif\n#endif\n")
    (inc / "b.h").write_text("typedef struct tether_b tether_b_t;\n")
    text = cdefgen.generate(tmp_path)
    body = [line for line in text.splitlines() if line and not line.startswith("/*")]
    assert body == ["typedef struct tether_b tether_b_t;", "#define TETHER_A ...", "#define TETHER_LONG ...",
                    "int tether_a(int x);"]
