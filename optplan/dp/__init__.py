"""Dynamic programming on known tabular models, shared by every layer above.

Bellman backups, policy evaluation (discounted, average reward, layered), Howard policy
iteration with a warm start (discounted and average reward), value iteration, relative value
iteration, backward induction, occupancy measures and recurrent classes. The fast planning
paths, the conic paths' post-processing, ``compare``, the agents and the metrics all use these
one implementations.

All are vectorized over states and actions; the only Python loops are over iterations
(policy/value iteration), layers (finite horizon) or recurrent classes.

One module per criterion: :mod:`~optplan.dp.discounted`, :mod:`~optplan.dp.average` (unichain
average reward; its iterations, compiled with numba when installed, in
:mod:`~optplan.dp._average_iteration`), :mod:`~optplan.dp.policy_iteration` (both),
:mod:`~optplan.dp.multichain` (several recurrent classes, model classification) and
:mod:`~optplan.dp.layered` (finite horizon); :mod:`~optplan.dp._common` holds what they share.
"""

from ._average_iteration import (
    ITERATIVE_BUDGET,
    ITERATIVE_MIN_STATES,
    ITERATIVE_TOL,
    LOOSE_TOL,
    TIGHTEN_FRACTION,
)
from ._common import (
    DENSE_CLASSES_MAX_STATES,
    EvaluationError,
    backup,
    closed_classes,
    generator,
    greedy,
    masked,
    n_recurrent_classes,
    policy_model,
    solve_system,
)
from ._linear import SPARSE_DIRECT_MAX_STATES, discounted_occupancy, evaluate_discounted
from .average import (
    APERIODIC_SHRINK,
    APERIODIC_WINDOW,
    STALL_DECREASE,
    STALL_WINDOW,
    UnichainEvaluation,
    evaluate_average,
    evaluate_unichain,
    relative_value_iteration,
    stationary,
)
from .discounted import (
    DENSE_ITERATIVE_MIN_STATES,
    DiscountedPolicyIteration,
    discounted_policy_iteration,
    value_iteration,
)
from .layered import backward_induction, evaluate_layered, forward_occupancy, layer_block
from .multichain import (
    ModelClass,
    MultichainEvaluation,
    MultichainPolicyIteration,
    class_gains,
    classify,
    evaluate_multichain,
    limiting_matrix,
    multichain_policy_iteration,
    near_max,
)
from .policy_iteration import PolicyIteration, average_policy_iteration, policy_iteration
from .sparse_average import (
    SparseUnichainEvaluation,
    evaluate_sparse_unichain,
    sparse_recurrent_classes,
)

__all__ = [
    "APERIODIC_SHRINK",
    "APERIODIC_WINDOW",
    "DENSE_CLASSES_MAX_STATES",
    "DENSE_ITERATIVE_MIN_STATES",
    "SPARSE_DIRECT_MAX_STATES",
    "DiscountedPolicyIteration",
    "SparseUnichainEvaluation",
    "evaluate_sparse_unichain",
    "sparse_recurrent_classes",
    "discounted_policy_iteration",
    "ITERATIVE_BUDGET",
    "ITERATIVE_MIN_STATES",
    "ITERATIVE_TOL",
    "LOOSE_TOL",
    "STALL_DECREASE",
    "STALL_WINDOW",
    "TIGHTEN_FRACTION",
    "EvaluationError",
    "ModelClass",
    "MultichainEvaluation",
    "MultichainPolicyIteration",
    "PolicyIteration",
    "UnichainEvaluation",
    "average_policy_iteration",
    "backup",
    "backward_induction",
    "class_gains",
    "classify",
    "closed_classes",
    "discounted_occupancy",
    "evaluate_average",
    "evaluate_discounted",
    "evaluate_layered",
    "evaluate_multichain",
    "evaluate_unichain",
    "forward_occupancy",
    "generator",
    "greedy",
    "layer_block",
    "limiting_matrix",
    "masked",
    "multichain_policy_iteration",
    "n_recurrent_classes",
    "near_max",
    "policy_iteration",
    "policy_model",
    "relative_value_iteration",
    "solve_system",
    "stationary",
    "value_iteration",
]
