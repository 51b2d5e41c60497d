"""benchmarks/gpu/bench_hooks.py's command line, without a GPU: the iterations and
repetitions a user asks for are the ones timed (stop 33 found the first positional
argument dropped, so `bench_hooks.py 20000 5` had timed 5 iterations)."""

from __future__ import annotations

import pytest

from script_support import REPO, load_script


@pytest.fixture(scope="module")
def bench():
    return load_script(REPO / "benchmarks" / "gpu" / "bench_hooks.py", "bench_hooks")


def test_positional_iterations_and_repetitions(bench):
    o = bench.parse_args(["20000", "5"])
    assert (o["iters"], o["reps"], o["rounds"], o["libs"], o["json"]) == (20000, 5, 3, ["torch", "cupy"], None)


def test_defaults(bench):
    o = bench.parse_args([])
    assert (o["iters"], o["reps"], o["rounds"]) == (20000, 7, 3)


def test_options_between_positionals(bench):
    o = bench.parse_args(["--rounds", "4", "1000", "--libs", "cupy", "3", "--json", "out.json"])
    assert (o["iters"], o["reps"], o["rounds"], o["libs"], o["json"]) == (1000, 3, 4, ["cupy"], "out.json")


@pytest.mark.parametrize("argv, words", [
    (["0"], "iters"), (["10", "0"], "reps"), (["--rounds", "0"], "rounds"),
    (["--rounds"], "--rounds"), (["--bogus"], "--bogus"), (["1", "2", "3"], "positional"),
])
def test_bad_arguments_name_what_is_wrong(bench, argv, words):
    with pytest.raises(SystemExit, match=words):
        bench.parse_args(argv)


def test_every_contender_is_valid_python_and_every_lib_has_its_rows(bench):
    # Each contender runs in a child interpreter built from these strings; a syntax error there
    # would only show on the GPU machine as a "not measured" row.
    import textwrap
    for (lib, who), code in bench.SETUP.items():
        compile(textwrap.dedent(code), f"<{lib} {who}>", "exec")
    for lib, extra in bench.EXTRA.items():
        assert all((lib, who) in bench.SETUP for who in bench.WHO + extra)
