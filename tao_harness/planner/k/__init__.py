"""The K level on any snapshot (lagrange.py's `k_level`): a proven upper bound on K, the total cache credit,
and a feasible placement of credited sessions on credit nodes, K-optimal when it reaches the bound.

The bound is the Lagrangian's (one exact knapsack per node, dual.py, multipliers from start.py and the LP,
lp.py), capped by a packing-only ceiling (ceiling.py) and HiGHS's branch and cut (mip.py); placements come
from the knapsacks' choices polished (polish.py), reshuffles (reshuffle.py) and two nodes re-solved together
(pairs.py). Around a proven K, unique.py
finds the credited pairs every K-optimal placement holds (or lists the few K-optimal placements) and
twins.py swaps in the twin sessions worth more in (r, t).
"""
