"""``topoplan demo``: the README's first command, on the default system and on a torus."""

import json

from topoplan.core.units import format_time


def test_demo_on_hybrid_tree(run_cli):
    code, out, err = run_cli("demo", "-T", "ring:np=64,bytes=4MB,iters=2", "--time-limit", "5")
    assert code == 0, err
    for row in ("EPS only", "fat-tree EPS", "greedy circuits", "ilp circuits"):
        assert row in out
    assert "1.00x" in out  # the EPS-only baseline row
    assert "network model: maxmin, pipelined relays (64 KiB chunks)" in out
    assert "same plan, store-and-forward relays" in out  # the other relay model, one more row


def test_demo_names_the_chosen_relay_model(run_cli):
    code, out, err = run_cli("demo", "-T", "ring:np=64,bytes=4MB,iters=1", "--time-limit", "5",
                             "--relay", "store-and-forward")
    assert code == 0, err
    assert "network model: maxmin, store-and-forward relays" in out and "same plan, pipelined relays" in out


def test_demo_on_mesh_has_no_eps_variants(run_cli):
    code, out, err = run_cli("demo", "-t", "mesh10x10x10", "-T", "ring:np=27,bytes=1MB")
    assert code == 0, err
    assert "mesh" in out and "EPS only" not in out and "top switch" not in out


def test_demo_bad_traffic_is_one_line(run_cli):
    code, _, err = run_cli("demo", "-T", "ring:np=9999,bytes=1MB")
    assert code == 2 and "do not fit" in err and len(err.strip().splitlines()) == 1


def test_demo_refuses_a_zero_time_limit_before_printing_anything(run_cli):
    """--time-limit 0 was refused only when the exact model ran, after the demo's first lines were printed."""
    code, out, err = run_cli("demo", "--time-limit", "0")
    assert (code, out) == (2, "") and err == ("error: --time-limit: must be more than 0 and at most 604800 s (7 days), "
                                              "got '0'\n")


def test_demo_on_a_matrix_replays_it_as_one_bulk_phase(run_cli, tmp_path):
    """A communication matrix (no trace to replay) stopped the demo with a traceback."""
    m = tmp_path / "m.csv"
    m.write_text("src,dst,bytes,msgs\n" + "".join(f"{r},{(r + 4) % 16},4000000,1\n" for r in range(16)))
    code, out, err = run_cli("demo", "-T", m, "--time-limit", "5")
    assert code == 0, err
    assert "EPS only" in out and "ilp circuits" in out
    code, sim, err = run_cli("simulate", "-t", "paper003", "-T", m, "--network", "eps", "--json")   # the same phase
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith("EPS only"))
    assert f" {format_time(json.loads(sim)['makespan_s'])} " in row
