"""The rates of the fifo model (:mod:`topoplan.sim.fifo`) compiled with Numba: transfers by age, each age group
filled max-min on what the older ones left.

:func:`priority_fill` computes what :meth:`topoplan.sim.fifo.FifoEngine._solve_rates` computes with NumPy, one
group after the other, with the same floating-point operations in the same order, so the two agree to the bit
(``tests/test_sim_fifo.py``). The NumPy version makes a dozen array calls per age group, and a replay of small
messages has hundreds of groups in flight at every event; here a group costs its entries. Only the links the
groups cross are touched.

Imported by the engine when it first solves (importing Numba costs a process about 0.6 s; the first call in a
fresh installation also compiles the kernel, a few seconds, cached on disk after).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["priority_fill"]


@njit(cache=True, nogil=True)
def priority_fill(rows, lens, used, group_ptr, scap, lcap, rel_tol, rate):
    """Rates of the transfers ``used`` (slots, oldest group first; group ``g`` is
    ``used[group_ptr[g]:group_ptr[g + 1]]``) into ``rate`` (per slot).

    A slot ``s`` crosses links ``rows[s, :lens[s]]`` (at least one) and is capped at ``scap[s]``; ``lcap`` is
    every link's capacity (inf: not shared). A transfer whose route crosses a link the older groups fill
    (what is left is at most ``rel_tol`` of the capacity) gets rate 0; the others of its group share what is
    left by progressive filling (:func:`topoplan.sim.maxmin._fill_numpy`'s rounds: every round freezes the
    flows of the links that no flow on them is held below).

    Examples
    --------
    Two links of 1 GB/s; an old transfer on link 0, then two that began together, on links 0-1 and on link 1:

    >>> import numpy as np
    >>> rows = np.array([[0, -1], [0, 1], [1, -1]])
    >>> rate = np.zeros(3)
    >>> priority_fill(rows, np.array([1, 2, 1]), np.array([0, 1, 2]), np.array([0, 1, 3]), np.full(3, np.inf),
    ...               np.array([1e9, 1e9]), 1e-12, rate)
    >>> rate.tolist()
    [1000000000.0, 0.0, 1000000000.0]
    """
    n_links = lcap.shape[0]
    left = lcap.copy()
    slack = 1.0 + rel_tol
    rem = np.empty(n_links)
    cnt = np.zeros(n_links)
    share = np.empty(n_links)
    held = np.zeros(n_links, dtype=np.bool_)
    acc = np.zeros(n_links)
    n_used = used.shape[0]
    live = np.empty(n_used, dtype=np.int64)      # the group's live slots, in order
    level = np.empty(n_used)
    frozen = np.zeros(n_used, dtype=np.bool_)
    touched = np.empty(n_links, dtype=np.int64)  # the links the group's live flows cross
    seen = np.zeros(n_links, dtype=np.bool_)
    for g in range(group_ptr.shape[0] - 1):
        n_live = 0
        for k in range(group_ptr[g], group_ptr[g + 1]):
            s = used[k]
            rate[s] = 0.0
            ok = True
            for e in range(lens[s]):
                ln = rows[s, e]
                if not left[ln] > rel_tol * min(lcap[ln], 1e300):   # older transfers fill it: wait
                    ok = False
                    break
            if ok:
                live[n_live] = s
                n_live += 1
        if n_live == 0:
            continue
        n_touched = 0
        for i in range(n_live):
            s = live[i]
            frozen[i] = False
            for e in range(lens[s]):
                ln = rows[s, e]
                if not seen[ln]:
                    seen[ln] = True
                    touched[n_touched] = ln
                    n_touched += 1
                    rem[ln] = left[ln]
                    cnt[ln] = 0.0
                cnt[ln] += 1.0
        n_left = n_live
        while True:
            for t in range(n_touched):
                ln = touched[t]
                share[ln] = rem[ln] / cnt[ln] if cnt[ln] > 0 else np.inf
                held[ln] = False
            for i in range(n_live):   # each unfrozen flow's tightest share
                if frozen[i]:
                    continue
                s = live[i]
                lv = np.inf
                for e in range(lens[s]):
                    lv = min(lv, share[rows[s, e]])
                level[i] = min(lv, scap[s])
            for i in range(n_live):   # a link is held when one of its flows is held lower by another link
                if frozen[i]:
                    continue
                s = live[i]
                for e in range(lens[s]):
                    ln = rows[s, e]
                    if level[i] * slack < share[ln]:
                        held[ln] = True
            n_freeze = 0
            for i in range(n_live):
                if frozen[i]:
                    continue
                s = live[i]
                fr = scap[s] <= level[i] * slack
                if not fr:
                    for e in range(lens[s]):
                        if not held[rows[s, e]]:
                            fr = True
                            break
                if fr:
                    rate[s] = level[i]
                    n_freeze += 1
                    frozen[i] = True
                    for e in range(lens[s]):
                        ln = rows[s, e]
                        acc[ln] += level[i]
                        cnt[ln] -= 1.0
            n_left -= n_freeze
            for t in range(n_touched):
                ln = touched[t]
                rem[ln] -= acc[ln]
                acc[ln] = 0.0
            if n_left == 0:
                break
        for i in range(n_live):   # what this group takes from every link it crosses
            s = live[i]
            for e in range(lens[s]):
                acc[rows[s, e]] += rate[s]
        for t in range(n_touched):
            ln = touched[t]
            left[ln] = max(left[ln] - acc[ln], 0.0)
            acc[ln] = 0.0
            seen[ln] = False
