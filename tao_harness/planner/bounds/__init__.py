"""The proofs that settle most snapshots cheaply, and the bound every plan carries.

certificate.py (with credit.py, its K level): with credit on at most one node per session, K* from one
knapsack per node and (R, T, N) from the surrogate relaxation; optimal when the relaxation's choice splits
into the rooms, else the residual left to search. lexicographic.py: a lexicographic upper bound on
(K, R, T, N) over every plan, or over every plan holding a known K placement, so each plan's proven gap
is explicit.
"""
