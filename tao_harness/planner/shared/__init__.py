"""What every layer of the planner builds on, proving nothing by itself: the admission problem in integers
with the value triple packed into one int whose order is the lexicographic one (problem.py), the deadline
(deadline.py), and the exact 0-1 knapsacks of one room, over float profits (knapsack.py, the K level's) and
over packed integer gains with the items taken (int_knapsack.py, the surrogate relaxation's)."""
