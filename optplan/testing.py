"""optplan in a user's test suite: :func:`assert_agrees` and hypothesis strategies.

::

    from optplan.testing import assert_agrees, mdps, distributions

    def test_my_kl_index():
        assert_agrees(my_kl_index, "kl_ball", n=200)      # AssertionError with a counterexample

    @given(mdps(max_states=10, discount=True))
    def test_my_value_iteration(model):
        V = my_value_iteration(model["P"], model["R"], model["discount"])
        ...

The strategies are those :func:`optplan.verify` draws from (:mod:`optplan.verification.
strategies`): they put zeros and masses down to 1e-300 in distributions, ties and values up to
1e6, radii from 0 to 1e300, ``S = 1`` to large ``S`` and masks on purpose, and shrink towards
the plain case. Importing this module imports hypothesis (``pip install 'optplan[verify]'``).
"""

from __future__ import annotations

from .verification.engine import require_hypothesis

require_hypothesis()  # a clear MissingDependency before the strategies' own import fails

from .verification import (  # noqa: E402
    Box,
    DeclaredProblem,
    Nonnegative,
    Simplex,
    VerifyReport,
    check_instance,
    optplan_fast,
    verify,
)
from .verification.strategies import (  # noqa: E402
    clipped_optimistic_instances,
    dirichlet_posteriors,
    discounts,
    distributions,
    index_instances,
    k_learning_posteriors,
    kl_inf_instances,
    layered_mdps,
    mdps,
    moment_matching_instances,
    optimistic_instances,
    policies,
    radii,
    ube_instances,
    values,
)

__all__ = [
    "assert_agrees",
    "verify",
    "check_instance",
    "optplan_fast",
    "DeclaredProblem",
    "Box",
    "Nonnegative",
    "Simplex",
    "VerifyReport",
    # strategies: distributions, values, parameters
    "distributions",
    "values",
    "radii",
    "discounts",
    "policies",
    # strategies: instances of optplan's problems
    "index_instances",
    "kl_inf_instances",
    "mdps",
    "layered_mdps",
    "ube_instances",
    "moment_matching_instances",
    "optimistic_instances",
    "clipped_optimistic_instances",
    # strategies: posteriors
    "dirichlet_posteriors",
    "k_learning_posteriors",
]


def assert_agrees(fn, problem, n: int = 200, seed: int = 0, **kwargs) -> VerifyReport:
    """Assert that ``fn`` agrees with the conic formulation of ``problem`` on ``n`` instances.

    Runs :func:`optplan.verify` (same arguments: ``solver``, ``rtol``, ``atol``, ``options``
    ...) and raises ``AssertionError`` unless the report is ``ok``; the message is the report,
    with the shrunk counterexamples as literals to paste into a regression test. Returns the
    report when it passes. Call it from a plain test function: inside a hypothesis ``@given``
    test it would nest two hypothesis runs, which hypothesis refuses unless the outer test
    suppresses ``HealthCheck.nested_given``.
    """
    __tracebackhide__ = True  # pytest shows the assertion, not this frame
    report = verify(fn, problem, n=n, seed=seed, **kwargs)
    if not report.ok:
        raise AssertionError("\n" + report.summary())
    return report
