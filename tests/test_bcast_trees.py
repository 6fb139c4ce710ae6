import numpy as np
import pytest

from topoplan.problems.bcast import trees
from topoplan.problems.bcast.timing import CostModel, TimeModel
from topoplan.core.errors import TopoplanError


def test_knomial_children_follow_mvapich2_order():
    s = trees.knomial(8, k=4)
    assert [c for c, _ in s.sends[0]] == [4, 1, 2, 3]
    assert [c for c, _ in s.sends[4]] == [5, 6, 7]
    assert s.parent.tolist() == [-1, 0, 0, 0, 0, 4, 4, 4]
    assert s.subtree_sizes().tolist() == [8, 1, 1, 1, 4, 1, 1, 1]


def test_binomial_is_knomial_two_and_spans_all():
    s = trees.binomial(13)
    assert [c for c, _ in s.sends[0]] == [8, 4, 2, 1]
    assert sorted(s.edges["child"].tolist()) == list(range(1, 13))


def test_scatter_sends_subtree_chunks_and_auto_thresholds():
    s = trees.scatter_allgather(8, 800.0, "ring")
    assert dict((c, b) for c, b in s.sends[0]) == {4: 400.0, 2: 200.0, 1: 100.0}
    (src, dst, nb, rep), = s.allgather_pairs()
    assert nb == 100.0 and rep == 7 and dst.tolist() == [1, 2, 3, 4, 5, 6, 7, 0]
    assert trees.build("auto", 64, 1000).kind == "knomial"
    assert trees.build("auto", 64, 100_000).kind == "scatter-rd"
    assert trees.build("auto", 60, 100_000).kind == "scatter-ring"
    assert trees.build("auto", 64, 1_000_000).kind == "scatter-ring"
    with pytest.raises(TopoplanError):
        trees.build("bogus", 4, 1)


def test_time_model_sequential_sends_and_slower_hca():
    # 4 nodes, node 3 is half speed: binomial root->2 then root->1, 2->3
    bw = np.array([1e9, 1e9, 1e9, 0.5e9])
    cm = CostModel.build(np.zeros((4, 4)), bw, 0.0, 1e-6)
    tm = TimeModel(trees.binomial(4, 1000.0), cm)
    arr = tm.arrivals(np.arange(4))
    assert arr[2] == pytest.approx(2e-6)           # 1 us latency + 1 us data
    assert arr[1] == pytest.approx(4e-6)           # after the first send
    assert arr[3] == pytest.approx(2e-6 + 3e-6)    # 1 us + 1000 B at 0.5 GB/s
    assert tm.time(np.arange(4)) == pytest.approx(5e-6)
