"""Progressive filling (max-min fair rates), compiled with Numba.

Kept apart from :mod:`sim.maxmin` so the engine stays readable; the NumPy
version there is the reference and the fallback when Numba is missing.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def active_rates(active, rptr, rlinks, bw, shared, rel):  # pragma: no cover - compiled
    """Rates of the ``active`` flows (routes in the global CSR) and the resulting bytes/s on every link."""
    m = len(active)
    f_ptr = np.zeros(m + 1, np.int64)
    for i in range(m):
        f = active[i]
        f_ptr[i + 1] = f_ptr[i] + rptr[f + 1] - rptr[f]
    f_links = np.empty(f_ptr[m], np.int64)
    for i in range(m):
        f = active[i]
        f_links[f_ptr[i]:f_ptr[i + 1]] = rlinks[rptr[f]:rptr[f + 1]]
    rate = maxmin_rates(f_ptr, f_links, bw, shared, rel)
    usage = np.zeros(len(bw))
    for i in range(m):
        if rate[i] < np.inf:
            for k in range(f_ptr[i], f_ptr[i + 1]):
                usage[f_links[k]] += rate[i]
    return rate, usage


@njit(cache=True)
def maxmin_rates(f_ptr, f_links, bw, shared, rel):  # pragma: no cover - compiled
    """Rates of ``m`` flows (CSR ``f_ptr``/``f_links`` of global link ids) under max-min fairness."""
    m = len(f_ptr) - 1
    nl = len(bw)
    cap = np.full(m, np.inf)
    has_cap = False
    count = np.zeros(nl, np.int64)
    for f in range(m):
        for k in range(f_ptr[f], f_ptr[f + 1]):
            l = f_links[k]
            if shared[l]:
                count[l] += 1
            elif bw[l] < cap[f]:
                cap[f] = bw[l]
                has_cap = True
    # link -> flows adjacency over the shared links in use
    touched = np.flatnonzero(count)
    l_ptr = np.zeros(nl + 1, np.int64)
    for l in range(nl):
        l_ptr[l + 1] = l_ptr[l] + count[l]
    fill = l_ptr[:-1].copy()
    l_flows = np.empty(l_ptr[nl], np.int64)
    for f in range(m):
        for k in range(f_ptr[f], f_ptr[f + 1]):
            l = f_links[k]
            if shared[l]:
                l_flows[fill[l]] = f
                fill[l] += 1
    free = bw.copy()
    n = count.copy()
    rate = np.full(m, np.inf)
    frozen = np.zeros(m, np.bool_)
    left = m
    while left > 0:
        level = np.inf
        for l in touched:
            if n[l] > 0:
                s = free[l] / n[l]
                if s < level:
                    level = s
        if has_cap:
            for f in range(m):
                if not frozen[f] and cap[f] < level:
                    level = cap[f]
        if level == np.inf:
            break
        lim = level * (1.0 + rel)
        for l in touched:
            if n[l] > 0 and free[l] / n[l] <= lim:
                for k in range(l_ptr[l], l_ptr[l + 1]):
                    f = l_flows[k]
                    if not frozen[f]:
                        frozen[f] = True
                        rate[f] = level
                        left -= 1
                        for j in range(f_ptr[f], f_ptr[f + 1]):
                            q = f_links[j]
                            if shared[q]:
                                free[q] -= level
                                n[q] -= 1
        for f in range(m if has_cap else 0):
            if not frozen[f] and cap[f] <= lim:
                frozen[f] = True
                rate[f] = level
                left -= 1
                for j in range(f_ptr[f], f_ptr[f + 1]):
                    q = f_links[j]
                    if shared[q]:
                        free[q] -= level
                        n[q] -= 1
        for l in touched:
            if free[l] < 0.0:
                free[l] = 0.0
    return rate
