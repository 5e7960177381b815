"""Fast paths: closed forms, 1-D root finding and dynamic programming, vectorized with NumPy.

One module per problem stem (``optplan.problems.<stem>``), each with ``solve(problem, ...)``.
"""
