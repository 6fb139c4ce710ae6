"""The traffic pass of :func:`topoplan.problems.circuits.forwarding.distance_vector`'s load sharing, compiled.

:meth:`topoplan.problems.circuits.forwarding._Sharing._traffic` takes the nodes with traffic towards one
destination switch one by one (farthest first, larger own traffic first, then node id), each choosing the
least-loaded tied next hop and loading its links; the relays it feeds join the queue. :func:`traffic_pass`
is the same pass in Numba: the same order, the same keys, the same float operations in the same order, so
the same tables and link loads bit for bit (``tests/test_circuits_scale.py`` compares them). On 16,384 nodes
and 512 switches the Python pass took about 5 s of the greedy method's tables; this takes a fraction of a
second. Imported only for large problems (importing Numba costs a small one more than the pass).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["traffic_pass"]


@njit(cache=True)
def _before(hd, hw, hn, a, b):
    """Heap order: ``(-dist, -own, node)`` ascending, as Python compares the tuples."""
    if hd[a] != hd[b]:
        return hd[a] < hd[b]
    if hw[a] != hw[b]:
        return hw[a] < hw[b]
    return hn[a] < hn[b]


@njit(cache=True)
def _swap(hd, hw, hn, a, b):
    hd[a], hd[b] = hd[b], hd[a]
    hw[a], hw[b] = hw[b], hw[a]
    hn[a], hn[b] = hn[b], hn[a]


@njit(cache=True)
def _push(hd, hw, hn, size, d, w, node):
    k = size
    hd[k], hw[k], hn[k] = d, w, node
    while k > 0:
        p = (k - 1) // 2
        if not _before(hd, hw, hn, k, p):
            break
        _swap(hd, hw, hn, k, p)
        k = p
    return size + 1


@njit(cache=True)
def _pop(hd, hw, hn, size):
    """Drop the top (read it first); returns the new size."""
    size -= 1
    hd[0], hw[0], hn[0] = hd[size], hw[size], hn[size]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= size:
            break
        if c + 1 < size and _before(hd, hw, hn, c + 1, c):
            c += 1
        if not _before(hd, hw, hn, c, k):
            break
        _swap(hd, hw, hn, c, k)
        k = c
    return size


@njit(cache=True)
def traffic_pass(t, nodes, owns, Dt, ct, et, fin, has_relay, best_g, tie_g, fb, use_fb, minc, sw, oi, cls, inv,
                 SLn, PMn, CL, load, down, up, ocs_bw, nh):
    """The traffic pass towards switch ``t`` (see the module): fills ``nh[:, t]`` of the nodes it takes and adds
    their traffic to ``load``; returns the events on relays' EPS down links as rows ``(relay OCS index, dist,
    own, node, load after)`` and the nodes taken, in order.

    ``nodes``/``owns``: the nodes with own traffic towards ``t`` and its bytes; the other arguments are
    :meth:`topoplan.problems.circuits.forwarding._Sharing.round`'s arrays (``fb`` read when ``use_fb``).
    """
    n = len(sw)
    P = PMn.shape[1]
    kmax = SLn.shape[1]
    own = np.zeros(n)
    queued = np.zeros(n, dtype=np.bool_)
    inflow = np.zeros(n)
    hd = np.empty(n)
    hw = np.empty(n)
    hn = np.empty(n, dtype=np.int64)
    size = 0
    for i in range(len(nodes)):
        own[nodes[i]] = owns[i]
    for i in range(len(nodes)):
        a = nodes[i]
        k = oi[a]
        if k >= 0 and fin[k]:
            d = Dt[k]
        elif has_relay[sw[a]] and not (use_fb and fb[a]):
            d = best_g[sw[a], cls[a]]
        else:
            continue
        size = _push(hd, hw, hn, size, -d, -owns[i], a)
        queued[a] = True
    events = np.empty((n, 5))
    ne = 0
    done = np.empty(n, dtype=np.int64)
    nd = 0
    while size > 0:
        dneg, wneg, u = hd[0], hw[0], hn[0]
        size = _pop(hd, hw, hn, size)
        f = -wneg + inflow[u]
        su = sw[u]
        i = oi[u]
        best_h, best_link, best_v = -1, -1, 0.0
        if i >= 0 and fin[i]:
            for j in range(P):   # a circuit tie: key (0, load of the circuit, partner)
                if ct[i, j]:
                    h, link = PMn[i, j], CL[i, j]
                    v = load[link]
                    if best_h < 0 or v < best_v or (v == best_v and h < best_h):
                        best_h, best_link, best_v = h, link, v
            if best_h < 0:
                for j in range(kmax):   # EPS ties: key (1, max(relay's down link, its least-loaded circuit), relay)
                    if et[i, j]:
                        h = SLn[su, j]
                        v = max(load[down + h], minc[oi[h]])
                        if best_h < 0 or v < best_v or (v == best_v and h < best_h):
                            best_h, best_link, best_v = h, -1, v
        else:
            c = cls[u]
            for j in range(kmax):
                if tie_g[su, c, j]:
                    h = SLn[su, j]
                    v = max(load[down + h], minc[oi[h]])
                    if best_h < 0 or v < best_v or (v == best_v and h < best_h):
                        best_h, best_link, best_v = h, -1, v
        if best_h < 0:
            raise ValueError("distance_vector: a node with a relay route has no tied next hop")
        h = best_h
        done[nd] = u
        nd += 1
        nh[u, t] = h
        if best_link >= 0:
            load[best_link] += f / ocs_bw
        else:
            load[up + u] += f * inv[u]
            load[down + h] += f * inv[h]
            events[ne, 0] = oi[h]
            events[ne, 1] = -dneg
            events[ne, 2] = -wneg
            events[ne, 3] = u
            events[ne, 4] = load[down + h]
            ne += 1
        inflow[h] += f
        if not queued[h] and sw[h] != t:
            queued[h] = True
            size = _push(hd, hw, hn, size, -Dt[oi[h]], -own[h], h)
    return events[:ne].copy(), done[:nd].copy()
