import numpy as np
import pytest

from topoplan.problems.bcast import BcastProblem, METHODS, solve
from topoplan.problems.bcast.allocation import cluster, generate, parse_spec
from topoplan.problems.bcast.problem import bft_visit, dft_visit, greedy_visit
from topoplan.core.errors import TopoplanError

# binomial over 4: root(0) sends to 2 then 1; 2 sends to 3 -> DFT visits 2,3,1 and BFT 2,1,3
D = np.array([[0, 3, 1, 2],
              [3, 0, 4, 4],
              [1, 9, 0, 4],
              [2, 4, 4, 0]], dtype=float)


def _prob(delay=D, tree="binomial", n=4, root=0):
    return BcastProblem.build(cluster(2, 4), placement=list(range(n)), root=root, bytes_B=1000, tree=tree, delay=delay)


def test_dft_gives_each_child_the_closest_node_to_its_parent_depth_first():
    p = _prob()
    assert dft_visit(p.schedule) == [2, 3, 1]
    r = solve(p, "dft", simulate=False)
    # pos2 <- node2 (d=1 from root), pos3 <- closest to node2 among {1,3}: node3, pos1 <- node1
    assert r.plan["order"] == [0, 1, 2, 3]


def test_bft_gives_each_child_the_closest_node_breadth_first():
    p = _prob()
    assert bft_visit(p.schedule) == [2, 1, 3]
    r = solve(p, "bft", simulate=False)
    # pos2 <- node2, pos1 <- closest to root among {1,3}: node3, pos3 <- node1
    assert r.plan["order"] == [0, 3, 2, 1]


def test_ties_go_to_allocation_order():
    flat = np.ones((4, 4)) - np.eye(4)
    r = solve(_prob(flat), "dft", simulate=False)
    # visit 2,3,1 takes nodes 1,2,3 in allocation order
    assert r.plan["order"] == [0, 3, 1, 2]


def test_greedy_places_largest_subtree_first():
    p = _prob(np.ones((8, 8)) - np.eye(8), tree="knomial", n=8)
    assert greedy_visit(p.schedule) == [4, 5, 1, 6, 2, 7, 3]
    d = np.full((8, 8), 5.0); np.fill_diagonal(d, 0); d[0, 6] = d[6, 0] = 1.0
    r = solve(_prob(d, tree="knomial", n=8), "greedy", simulate=False)
    assert r.plan["order"][4] == 6      # the size-4 subtree gets the root's best link


def test_root_stays_and_default_is_allocation_order():
    p = _prob(root=2)
    for m in METHODS:
        if m == "ilp":
            continue
        r = solve(p, m, seed=1, time_limit=2, simulate=False, **({"max_steps": 300} if m == "anneal" else {}))
        assert r.plan["order"][2] == 2 and sorted(r.plan["order"]) == [0, 1, 2, 3]
    assert solve(p, "default", simulate=False).plan["order"] == [0, 1, 2, 3]


def test_speed_aware_beats_default_on_mixed_cluster_and_simulates():
    topo = cluster(4, 8, bw_Bps="mixed")
    nodes = generate(topo, 16, racks=4, seed=2)
    p = BcastProblem.build(topo, placement=nodes, root=0, bytes_B=65536, tree="knomial", delay="speed")
    d = solve(p, "default")
    b = solve(p, "bft")
    assert b.objective < d.objective
    assert b.metrics["simulated_time_s"] > 0 and d.metrics["simulated_time_s"] > 0
    assert b.metrics["predicted_time_s"] == pytest.approx(b.objective)


@pytest.mark.parametrize("racks,tree,delay,nbytes", [(8, "knomial", "hops", 1 << 20), (8, "binomial", "speed", 1 << 16),
                                                     (8, "scatter-ring", "hops", 1 << 20), (32, "knomial", "speed", 1),
                                                     (32, "knomial", "speed", 1024)])
def test_anneal_within_two_percent_of_proven_ilp(racks, tree, delay, nbytes):
    topo = cluster(racks, 8 if racks == 8 else 16, bw_Bps="mixed" if delay == "speed" else 1e9)
    nodes = generate(topo, 32, racks=8, seed=3 if racks == 8 else 1)
    p = BcastProblem.build(topo, placement=nodes, root=0, bytes_B=nbytes, tree=tree, delay=delay)
    ilp = solve(p, "ilp", time_limit=600, simulate=False)
    assert ilp.status == "optimal" and ilp.bound <= ilp.objective * (1 + 1e-9)
    # a fixed iteration count (time limit far away) keeps the run deterministic on a loaded machine
    an = solve(p, "anneal", seed=0, time_limit=600, max_steps=50_000, simulate=False)
    assert an.objective <= ilp.objective * 1.02
    for m in ("default", "dft", "bft", "greedy"):
        assert solve(p, m, simulate=False).objective >= ilp.bound * (1 - 1e-9)


def test_allocation_generator_and_errors(tmp_path):
    topo = cluster(10, 4)
    a = parse_spec("gen:nodes=20,racks=5,seed=1", topo)
    assert len(set(a.tolist())) == 20 and len(set((a // 4).tolist())) == 5
    f = tmp_path / "alloc.txt"
    f.write_text("n00003\n# comment\n7\n")
    assert parse_spec(str(f), topo).tolist() == [3, 7]
    f.write_text("nope\n")
    with pytest.raises(TopoplanError, match="alloc.txt:1"):
        parse_spec(str(f), topo)
    with pytest.raises(TopoplanError):
        parse_spec("gen:nodes=200", topo)
    with pytest.raises(TopoplanError):
        solve(_prob(), "nosuch")
    with pytest.raises(TopoplanError, match="field 'seed'"):
        solve(_prob(), "anneal", seed=-1)
    # an inline Slurm host list ($SLURM_JOB_NODELIST), in its order
    assert parse_spec("n[00005-00007],n00001", topo).tolist() == [5, 6, 7, 1]
    with pytest.raises(TopoplanError, match=r"--allocation n00001,x9: unknown host 'x9'"):
        parse_spec("n00001,x9", topo)
    with pytest.raises(TopoplanError, match="appears twice"):
        parse_spec("n[00001-00002],n00001", topo)


def test_allocation_file_names_the_line_of_a_repeated_or_missing_node(tmp_path):
    """A node listed twice, or one past the topology, is reported at its line (and where it was first)."""
    topo = cluster(4, 4)
    path = tmp_path / "nodes.txt"
    path.write_text("# job\nn00001\nn00002\n\nN00001\n")
    with pytest.raises(TopoplanError, match=r"nodes\.txt:5: node 1 \(n00001\) appears twice \(first at "
                                            r".*nodes\.txt:2; one leader per node\)"):
        parse_spec(str(path), topo)
    path.write_text("1\n16\n")
    with pytest.raises(TopoplanError, match=r"nodes\.txt:2: node 16 outside the topology's 16 nodes"):
        parse_spec(str(path), topo)


def test_allocation_host_list_separated_by_spaces_and_gen_keys_once():
    """Slurm separates a host list's items by spaces too ('n00003 n00001' was taken for a missing file), and a
    gen: key given twice was the last one, unseen."""
    topo = cluster(4, 4)
    assert parse_spec("n00003 n00001", topo).tolist() == [3, 1]
    assert parse_spec("n[00004-00005]\tn00001", topo).tolist() == [4, 5, 1]
    with pytest.raises(TopoplanError, match=r"gen:nodes=4,nodes=8: nodes given twice"):
        parse_spec("gen:nodes=4,nodes=8", topo)


def test_a_json_file_as_allocation_says_what_it_is(tmp_path):
    """A plan given as -a was read a line at a time: 'p.json:1: unknown host '{''."""
    path = tmp_path / "p.json"
    path.write_text('{"order": [0, 1]}\n')
    with pytest.raises(TopoplanError, match=r"p\.json: a JSON document \(a plan\?\), not an allocation"):
        parse_spec(str(path), cluster(2, 2))
