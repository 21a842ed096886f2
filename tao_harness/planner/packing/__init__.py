"""Exact packings of sessions into the real rooms, shared by the K level and the rest: splitting a chosen
set into the rooms (split.py), the size-nested surrogate bound (nested.py), whether a set fits the rooms at
all (feasible.py), room-by-room and pairwise re-packs (improve.py) and bin-completion branch and bound
(bins.py). Each returns a feasible placement, or a bound with the choice reaching it; a search past its node
limit or deadline returns its best placement unproven."""
