import json

import numpy as np
import pytest

from topoplan.core.errors import TopoplanError
from topoplan.core.placement import Placement, load_placement, read_placement, sequential
from topoplan.core.topology_io import load_topology


def test_sequential_fills_cores_then_nodes():
    t = load_topology("paper003")
    p = sequential(256, t)
    assert p.rank_to_node[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert p.rank_to_slot[:5].tolist() == [0, 1, 2, 3, 0]
    assert t.node_switch()[p.rank_to_node[63]] == 0 and t.node_switch()[p.rank_to_node[64]] == 1
    p.validate(t)


def test_too_many_ranks():
    with pytest.raises(TopoplanError, match="257 ranks do not fit"):
        sequential(257, load_topology("paper003"))


def test_round_robin():
    t = load_topology("paper003")
    p = load_placement("round-robin", 70, t)
    assert p.rank_to_node[:3].tolist() == [0, 1, 2] and p.rank_to_node[64] == 0 and p.rank_to_slot[64] == 1


def test_validation_catches_double_booking():
    t = load_topology("paper003")
    p = Placement(np.array([0, 0]), np.array([1, 1]))
    with pytest.raises(TopoplanError, match="share node 0 slot 1"):
        p.validate(t)
    with pytest.raises(TopoplanError, match="slot 4 of node 0"):
        Placement(np.array([0]), np.array([4])).validate(t)
    with pytest.raises(TopoplanError, match="no ranks placed"):
        Placement(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).validate(t)


def test_placement_files(tmp_path):
    t = load_topology("paper003")
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"rank_to_node": [3, 3, 1], "method": "x"}))
    p = load_placement(str(j), 3, t)
    assert p.rank_to_slot.tolist() == [0, 1, 0]
    c = tmp_path / "p.csv"
    c.write_text("rank,node,slot\n1,2,0\n0,2,1\n")
    p = read_placement(c)
    assert p.rank_to_node.tolist() == [2, 2] and p.rank_to_slot.tolist() == [1, 0]
    c.write_text("rank,node\n0,1\n0,2\n")
    with pytest.raises(TopoplanError, match="field 'rank'"):
        read_placement(c)


def test_placement_csv_takes_host_names_of_any_topology(tmp_path):
    """Host names (any case, as the topology names them) stand for node ids; slots and validation are the same."""
    t = load_topology("paper003")                          # default host names node0000..node0063
    p = tmp_path / "p.csv"
    p.write_text("rank,node,slot\n0,node0005,1\n1,NODE0005,0\n2,7,0\n")
    pl = load_placement(str(p), 3, t)
    assert pl.rank_to_node.tolist() == [5, 5, 7] and pl.rank_to_slot.tolist() == [1, 0, 0]
    p.write_text("rank,node\n0,node0005\n1,\n")
    with pytest.raises(TopoplanError, match=r"p.csv:3: field 'node': empty"):
        load_placement(str(p), 2, t)
    p.write_text("rank,node\n0,node0005\n1,1.5\n")
    with pytest.raises(TopoplanError, match=r"p.csv:3: field 'node': unknown host '1.5'"):
        load_placement(str(p), 2, t)
    p.write_text("rank,node\n0,1.5\n")
    with pytest.raises(TopoplanError, match=r"p.csv:2: field 'node': not an integer"):
        load_placement(str(p), 1, t)


def test_too_many_ranks_without_a_slurm_file_has_no_hint():
    with pytest.raises(TopoplanError, match=r"= 256 slots$"):
        sequential(257, load_topology("paper003"))


def test_a_plan_archive_is_a_placement_as_its_json_plan_is(run_cli, tmp_path):
    # simulate/circuits/place -p plan.zip: the plan's rank_to_node (it was read as a CSV: 'binary data')
    import json

    from topoplan.core.placement import read_placement

    args = ["circuits", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=4MB,iters=1", "-p", "round-robin",
            "-m", "greedy", "--no-simulate"]
    assert run_cli(*args, "-o", tmp_path / "plan.zip")[0] == 0
    assert run_cli(*args, "-o", tmp_path / "plan.json")[0] == 0
    got = read_placement(tmp_path / "plan.zip")
    assert got.to_dict()["rank_to_node"] == json.loads((tmp_path / "plan.json").read_text())["rank_to_node"]
    code, out, err = run_cli("simulate", "-t", "paper003", "-T", "neighbor2d:rows=8,cols=8,bytes=4MB,iters=1",
                             "-p", tmp_path / "plan.zip")
    assert code == 0, err


def test_gzipped_placements_by_their_names(run_cli, tmp_path):
    # a gzipped CSV placement was read as gzipped JSON by export ('malformed plan'); a .json.gz as a CSV
    import gzip

    from topoplan.core.placement import read_placement

    (tmp_path / "p.csv.gz").write_bytes(gzip.compress(b"rank,node\n0,3\n1,2\n"))
    (tmp_path / "p.json.gz").write_bytes(gzip.compress(b'{"rank_to_node": [3, 2]}'))
    for name in ("p.csv.gz", "p.json.gz"):
        assert read_placement(tmp_path / name).to_dict()["rank_to_node"] == [3, 2]
        code, _, err = run_cli("export", "slurm", "-p", tmp_path / name, "-t", "paper003", "-o", tmp_path / "h")
        assert code == 0, err
        assert (tmp_path / "h").read_text().split() == ["node0003", "node0002"]


def test_bad_node_or_slot_names_the_file_line_and_field(tmp_path):
    """A placement file's rank on a node or slot the topology lacks is reported at its line (CSV) or item (JSON)."""
    t = load_topology("paper003")                            # 64 nodes x 4 cores
    c = tmp_path / "p.csv"
    c.write_text("rank,node\n0,0\n\n2,1\n1,99\n")
    with pytest.raises(TopoplanError, match=r"p\.csv:5: field 'node': rank 1 is on node 99, but the topology has 64"):
        load_placement(str(c), 3, t)
    c.write_text("rank,node,slot\n0,0,0\n1,1,7\n")
    with pytest.raises(TopoplanError, match=r"p\.csv:3: field 'slot': rank 1 is on slot 7 of node 1"):
        load_placement(str(c), 2, t)
    c.write_text("rank,node,slot\n0,1,0\n1,1,0\n")
    with pytest.raises(TopoplanError, match=r"p\.csv:3: field 'slot': ranks 0 and 1 share node 1 slot 0"):
        load_placement(str(c), 2, t)
    c.write_text("rank,node\n" + "".join(f"{r},5\n" for r in range(5)))   # a fifth rank on a node of 4 cores
    with pytest.raises(TopoplanError, match=r"p\.csv:6: field 'node': rank 4 is on slot 4 of node 5"):
        load_placement(str(c), 5, t)
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"rank_to_node": [0, -1]}))
    with pytest.raises(TopoplanError, match=r"p\.json: field 'rank_to_node': item 1: rank 1 is on node -1"):
        load_placement(str(j), 2, t)
    j.write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [0, 4]}))
    with pytest.raises(TopoplanError, match=r"p\.json: field 'rank_to_slot': item 1: rank 1 is on slot 4"):
        load_placement(str(j), 2, t)
    j.write_text(json.dumps({"rank_to_node": [0, 0], "rank_to_slot": [0]}))
    with pytest.raises(TopoplanError, match=r"p\.json: field 'rank_to_slot': 1 slots for 2 ranks"):
        read_placement(j)


def test_a_placement_read_from_a_file_pickles(tmp_path):
    """Its origin (where each rank was read, for errors) stays behind: another process gets the placement."""
    import pickle

    c = tmp_path / "p.csv"
    c.write_text("rank,node\n0,3\n1,99\n")
    p = pickle.loads(pickle.dumps(read_placement(c)))
    assert p.to_dict() == {"rank_to_node": [3, 99], "rank_to_slot": [0, 0]} and p.origin is None
