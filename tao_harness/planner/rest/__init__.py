"""The best plan holding a K placement (around.py): the certificate around it, else its residual (the other
sessions, worth (0, r, t) wherever they may go, in the rooms left) searched by branch and bound, as a K
level of its own (packed_level.py), then by the exact capacity-state DP (dp.py; also the whole problem's,
for small ones). Returns the best placement found; optimal around the K placement unless `fallback`."""
