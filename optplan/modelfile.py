"""Read and write the declarative TOML model files in ``models/``.

A model file has one of two forms.

**Explicit arrays**::

    name = "cowan3"                    # optional, default: the file name without suffix
    description = "..."                # optional, free text
    criterion = "average"              # "average" | "discounted" | "finite_horizon"
    discount = 0.95                    # required iff criterion = "discounted"
    P = [[[...], ...], ...]            # P[s][a][s']   (finite_horizon: P[l][s][a][s'])
    R = [[...], ...]                   # R[s][a]       (finite_horizon: R[l][s][a])
    # or, for a sparse model, instead of P: P's CSR arrays, the (S*A, S) matrix whose
    # row s*A + a is P[s][a] (scipy.sparse.csr_matrix's fields); finite_horizon: the
    # (L*S*A, S) matrix whose row l*S*A + s*A + a is P[l][s][a]
    P_csr = {indptr = [...], indices = [...], data = [...]}
    initial = [...]                    # optional, default uniform
    action_mask = [[true, ...], ...]   # optional, default all admissible
                                       # (finite_horizon: [s][a] for every layer or [l][s][a])

**Generator**::

    generator = "riverswim"            # a key of optplan.generators.GENERATORS
    n_states = 6                       # any parameter of that generator, as a top-level key
    name, description, criterion, discount   # optional, as above
    horizon = 20                       # required iff criterion = "finite_horizon": the
                                       # stationary model repeated over that many layers

Without ``criterion`` a generator file is ``"discounted"`` if it sets ``discount`` and
``"average"`` otherwise. Every error raises ``ValueError`` naming the file and the key (a missing
file raises ``FileNotFoundError``); errors from the model's own validation
(:mod:`optplan.mdp`) are re-raised as ``ValueError`` with the file name prefixed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from ._checks import OptplanError, OptplanTypeError, check_int, check_writable, write_error
from .generators import GENERATORS
from .mdp import CRITERIA, FiniteHorizonMDP, TabularMDP, shape_fault

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["load_model", "save_model", "load_counts", "CRITERIA"]

#: The values of the ``criterion`` key.

_COMMON_KEYS = ("name", "description", "criterion", "discount")
_ARRAY_KEYS = ("P", "P_csr", "R", "initial", "action_mask")
_CSR_KEYS = ("indptr", "indices", "data")
_GENERATOR_KEYS = ("generator", "horizon")

Model = TabularMDP | FiniteHorizonMDP


def _fail(path: Path, key: str, message: str) -> OptplanError:
    return OptplanError(f"{path}: key '{key}': {message}")


def _string(path: Path, data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(path, key, f"must be a string, got {type(value).__name__} {value!r}")
    return value


def _array(path: Path, key: str, value: Any, ndims: tuple[int, ...], kind: str) -> np.ndarray:
    """Nested TOML arrays -> ndarray; ``kind`` is ``"number"`` (int or float) or ``"bool"``."""
    want = " or ".join(f"{n}-dimensional" for n in ndims)
    if not isinstance(value, list):
        raise _fail(path, key, f"must be a {want} array of {kind}s, got {type(value).__name__}")
    try:
        arr = np.array(value, dtype=object)
    except ValueError:
        arr = None
    if arr is None or arr.ndim not in ndims:
        raise _fail(path, key, f"must be a {want} array of {kind}s (nested lists of equal length)")
    leaf_types = {type(x) for x in arr.flat}
    allowed = {bool} if kind == "bool" else {int, float}
    bad = leaf_types - allowed
    if bad:
        names = ", ".join(sorted(t.__name__ for t in bad))
        raise _fail(path, key, f"must hold {kind}s only, found {names}")
    return arr.astype(bool if kind == "bool" else float)


def _csr(path: Path, table: Any, S: int, A: int, L: int | None = None):
    """``P_csr = {indptr, indices, data}`` -> a CSR matrix of shape ``(S*A, S)`` (``(L*S*A,
    S)`` for a layered model); the arrays' consistency checked here (naming the key), the
    probabilities by ``TabularMDP`` / ``FiniteHorizonMDP``."""
    import scipy.sparse as sp

    key = "P_csr"
    if not isinstance(table, dict):
        raise _fail(
            path, key, f"must be a table {{indptr, indices, data}}, got {type(table).__name__}"
        )
    _unknown_keys(path, table, _CSR_KEYS, "P_csr")
    for k in _CSR_KEYS:
        if k not in table:
            raise _fail(path, key, f"needs '{k}' (the keys are {', '.join(_CSR_KEYS)})")
    data = _array(path, f"{key}.data", table["data"], (1,), "number")
    ints = {}
    for k in ("indptr", "indices"):
        arr = _array(path, f"{key}.{k}", table[k], (1,), "number")
        if arr.size and (arr != np.round(arr)).any():
            raise _fail(path, f"{key}.{k}", "must hold integers")
        huge = np.abs(arr) >= 2.0**62  # would wrap in int64
        if huge.any():
            value = float(arr[huge][0])
            raise _fail(path, f"{key}.{k}", f"holds {value:g}, far outside any model's size")
        ints[k] = arr.astype(np.int64)
    indptr, indices = ints["indptr"], ints["indices"]
    n_rows = S * A * (1 if L is None else L)
    if indptr.size != n_rows + 1 or (indptr.size and indptr[0] != 0):
        rows, shape = ("S*A", (S, A)) if L is None else ("L*S*A", (L, S, A))
        raise _fail(
            path,
            f"{key}.indptr",
            f"must have {rows} + 1 = {n_rows + 1} entries starting at 0 "
            f"(R has shape {shape}), got {indptr.size}",
        )
    if (np.diff(indptr) < 0).any() or indptr[-1] != data.size or indices.size != data.size:
        raise _fail(
            path,
            key,
            f"inconsistent arrays: indptr must be non-decreasing and end at "
            f"len(data) = len(indices) ({data.size}, {indices.size}), ends at {indptr[-1]}",
        )
    if indices.size and (indices.min() < 0 or indices.max() >= S):
        bad = int(indices[(indices < 0) | (indices >= S)][0])
        raise _fail(path, f"{key}.indices", f"holds state {bad}, outside 0..{S - 1}")
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, S))


def _check_shape(path: Path, key: str, arr: np.ndarray, expected: tuple[int, ...], why: str):
    if arr.shape != expected:
        raise _fail(path, key, f"has shape {arr.shape}, expected {expected} {why}")


def _criterion(path: Path, data: dict[str, Any], default: str | None) -> tuple[str, float | None]:
    criterion = _string(path, data, "criterion")
    if criterion is None:
        if default is None:
            raise _fail(path, "criterion", f"is required (one of {', '.join(CRITERIA)})")
        criterion = default
    if criterion not in CRITERIA:
        raise _fail(
            path, "criterion", f"unknown criterion {criterion!r}, expected one of {CRITERIA}"
        )
    discount = data.get("discount")
    if criterion == "discounted":
        if discount is None:
            raise _fail(path, "discount", "is required when criterion = 'discounted'")
        if isinstance(discount, bool) or not isinstance(discount, (int, float)):
            raise _fail(path, "discount", f"must be a number, got {type(discount).__name__}")
        discount = float(discount)
    elif discount is not None:
        raise _fail(
            path, "discount", f"is only allowed with criterion = 'discounted', not {criterion!r}"
        )
    return criterion, discount


def _unknown_keys(path: Path, data: dict[str, Any], allowed, what: str) -> None:
    for key in data:
        if key not in allowed:
            raise _fail(path, key, f"unknown key for {what} (allowed: {', '.join(allowed)})")


def _from_arrays(path: Path, data: dict[str, Any], name: str) -> Model:
    _unknown_keys(path, data, _COMMON_KEYS + _ARRAY_KEYS, "an explicit-array model")
    criterion, discount = _criterion(path, data, default=None)
    layered = criterion == "finite_horizon"
    if "P" in data and "P_csr" in data:
        raise _fail(path, "P_csr", "and 'P' are two forms of the same array: give one")
    for key in ("P" if "P_csr" not in data else "P_csr", "R"):
        if key not in data:
            raise _fail(path, key, "is required in an explicit-array model (or set 'generator')")
    R = _array(path, "R", data["R"], (3,) if layered else (2,), "number")
    S, A = R.shape[-2:]
    if "P_csr" in data:
        P = _csr(path, data["P_csr"], S, A, R.shape[0] if layered else None)
    else:
        P = _array(path, "P", data["P"], (4,) if layered else (3,), "number")
        fault = shape_fault(P.shape, R.shape)  # names R when P is consistent and R is not
        if fault is not None:
            raise _fail(path, *fault)
    initial = mask = None
    if "initial" in data:
        initial = _array(path, "initial", data["initial"], (1,), "number")
        _check_shape(path, "initial", initial, (S,), f"= (S,) from R of shape {R.shape}")
    if "action_mask" in data:
        mask = _array(path, "action_mask", data["action_mask"], (2, 3) if layered else (2,), "bool")
        if mask.ndim == 2:
            _check_shape(path, "action_mask", mask, (S, A), f"= (S, A) from R of shape {R.shape}")
        else:
            _check_shape(
                path, "action_mask", mask, R.shape, f"= (L, S, A) from R of shape {R.shape}"
            )
    try:
        if layered:
            return FiniteHorizonMDP(P, R, initial=initial, action_mask=mask, name=name)
        return TabularMDP(P, R, discount=discount, initial=initial, action_mask=mask, name=name)
    except (ValueError, TypeError) as exc:
        raise OptplanError(f"{path}: {exc}") from None


def _from_generator(path: Path, data: dict[str, Any], name: str) -> Model:
    gen_name = _string(path, data, "generator")
    if gen_name not in GENERATORS:
        raise _fail(
            path,
            "generator",
            f"unknown generator {gen_name!r}, expected one of {sorted(GENERATORS)}",
        )
    generator = GENERATORS[gen_name]
    default = "discounted" if data.get("discount") is not None else "average"
    criterion, discount = _criterion(path, data, default=default)
    signature = inspect.signature(generator).parameters
    params = {k: v for k, v in data.items() if k not in _COMMON_KEYS + _GENERATOR_KEYS}
    for key in params:
        if key not in signature:
            raise _fail(
                path,
                key,
                f"not a parameter of generator {gen_name!r} (parameters: {', '.join(signature)})",
            )
    passes_discount = "discount" in signature
    if passes_discount:
        params["discount"] = discount
    horizon = data.get("horizon")
    if criterion == "finite_horizon":
        if horizon is None:
            raise _fail(
                path,
                "horizon",
                "is required when a generator file sets criterion = 'finite_horizon'",
            )
        try:
            check_int("horizon", horizon)
        except OptplanError:
            raise _fail(path, "horizon", f"must be a positive integer, got {horizon!r}") from None
    elif horizon is not None:
        raise _fail(
            path, "horizon", f"is only allowed with criterion = 'finite_horizon', not {criterion!r}"
        )
    try:
        mdp = generator(**params)
        if not passes_discount:
            mdp = mdp.with_discount(discount)
        mdp = dataclasses.replace(mdp, name=name)
        if criterion == "finite_horizon":
            return FiniteHorizonMDP.from_stationary(mdp, horizon)
        return mdp
    except (ValueError, TypeError) as exc:
        raise OptplanError(f"{path}: generator {gen_name!r}: {exc}") from None


def file_kind(data: dict[str, Any]) -> str:
    """What an optplan TOML file holds, told by its keys (the files declare no kind):
    ``"sweep"`` (``agents`` / ``envs`` tables, :mod:`optplan.sweeps.sweep`),
    ``"counts"`` (pseudo-counts ``T`` without ``P`` or ``generator``, :func:`load_counts`) or
    ``"model"`` (everything else, :func:`load_model`)."""
    if "agents" in data or "envs" in data:
        return "sweep"
    if "T" in data and "P" not in data and "generator" not in data:
        return "counts"
    return "model"


def wrong_kind(path: Path, data: dict[str, Any], want: str) -> OptplanError | None:
    """The error for a file of another kind than ``want`` (``"model"``, ``"counts"`` or
    ``"sweep"``): what the file is and which command takes it; ``None`` if it is a ``want``."""
    kind = file_kind(data)
    if kind == want:
        return None
    use = {
        "model": f"solve it with `optplan solve {path}` (or run agents on it: --env model "
        f"--param path={path})",
        "counts": (
            "it is an index agent's initial_counts, e.g. `optplan run --agent mdp-ucb --env "
            f"model --param path=MODEL --param initial_counts={path} --steps N`"
        ),
        "sweep": f"run it with `optplan sweep {path} --out DIR`",
    }[kind]
    what = {
        "model": "a model file",
        "counts": "a counts file (pseudo-counts T[x][a][y]"
        + (f" for the model {data['model']!r}" if isinstance(data.get("model"), str) else "")
        + ")",
        "sweep": "a sweep file",
    }[kind]
    wanted = {"model": "a model", "counts": "a counts file", "sweep": "a sweep"}[want]
    return OptplanError(f"{path}: is {what}, not {wanted}: {use}")


#: Files a sweep's driver read and sent with the task this process runs: ``path as the
#: sweep names it -> contents`` (:func:`shipped`); :func:`load_model` and :func:`load_counts`
#: read these before the disk.
SHIPPED: dict[str, bytes] = {}


@contextlib.contextmanager
def shipped(files: dict[str, bytes]):
    """Within the block, :func:`load_model` and :func:`load_counts` read ``files`` (``path ->
    contents``, the paths as a sweep names them) instead of the disk: a worker on another
    machine, or in another directory, builds a task from the files its driver read."""
    SHIPPED.update(files)
    try:
        yield
    finally:
        for key in files:
            SHIPPED.pop(key, None)


def read_shippable(path) -> bytes | None:
    """The contents of ``path`` for :func:`shipped`, ``None`` where it cannot be read (the
    worker then reports the error as a task's)."""
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _read(path: Path) -> bytes:
    """The file's bytes: the shipped copy where there is one (:func:`shipped`)."""
    data = SHIPPED.get(str(path))
    if data is not None:
        return data
    with path.open("rb") as fh:
        return fh.read()


def load_model(path: str | os.PathLike) -> Model:
    """Load a model file (explicit arrays or a generator call; see the module docstring).

    Parameters
    ----------
    path : str or path-like
        A TOML file, read with :mod:`tomllib` (``tomli`` before Python 3.11).

    Returns
    -------
    TabularMDP or FiniteHorizonMDP
        ``TabularMDP(discount=None)`` for ``criterion = "average"``, ``TabularMDP(discount=d)``
        for ``"discounted"``, ``FiniteHorizonMDP`` for ``"finite_horizon"``. The model's name is
        the ``name`` key, or the file name without its suffix.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the path is a directory, the file is not valid TOML, or a key is missing, unknown,
        of the wrong type or shape, or the model fails validation (a generator's model above
        :data:`optplan.mdp.MAX_MODEL_BYTES` included); the message names the file and the key.
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise OptplanTypeError(f"path must be a model file path, got {path!r}")
    path = Path(path)
    if path.is_dir():
        files = sorted(f.name for f in path.glob("*.toml"))
        hint = f" (its model files: {', '.join(files[:6])}{', ...' if len(files) > 6 else ''})"
        raise OptplanError(f"{path}: is a directory, not a model file{hint if files else ''}")
    try:
        data = tomllib.loads(_read(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptplanError(f"{path}: not valid TOML: {exc}") from None
    error = wrong_kind(path, data, "model")
    if error is not None:
        raise error
    name = _string(path, data, "name")
    _string(path, data, "description")
    if name is None:
        name = path.stem
    if "generator" in data:
        return _from_generator(path, data, name)
    return _from_arrays(path, data, name)


#: An innermost array as ``tomli_w`` writes it: one item per line.
_INNERMOST = re.compile(r"\[\n((?:[ ]*[^\[\]\n]+,\n)+)([ ]*)\]")
#: The width :func:`_compact` fills lines to.
_WIDTH = 96


def _compact(text: str) -> str:
    """``tomli_w``'s output with each innermost array (of numbers or booleans) on as few lines
    as fit in :data:`_WIDTH` columns: a row of ``P`` reads as one line."""

    def join(match: re.Match) -> str:
        items = [line.strip() for line in match[1].splitlines()]
        indent = match[2]
        one = "[" + ", ".join(item.rstrip(",") for item in items) + "]"
        if len(indent) + len(one) <= _WIDTH:
            return one
        lines, line = [], ""
        for item in items:
            if line and len(indent) + 4 + len(line) + 1 + len(item) > _WIDTH:
                lines.append(line)
                line = ""
            line = f"{line} {item}" if line else item
        lines.append(line)
        body = "".join(f"{indent}    {line}\n" for line in lines)
        return f"[\n{body}{indent}]"

    return _INNERMOST.sub(join, text)


def save_model(model: Model, path: str | os.PathLike, *, description: str | None = None) -> Path:
    """Write ``model`` as an explicit-array model file; ``load_model`` reads it back exactly.

    Floats are written by :mod:`tomli_w` with ``repr``, the shortest string that parses back
    to the same double, so ``load_model(save_model(m, f)) == m`` holds bit for bit; each row
    of an array on one line (wrapped at 96 columns).
    ``initial`` is written only when it is not uniform, ``action_mask`` only when some action
    is masked out (the defaults reproduce both exactly). A sparse model is written compactly,
    as ``P_csr`` (its CSR arrays), and read back sparse.

    Parameters
    ----------
    model : TabularMDP or FiniteHorizonMDP
    path : str or path-like
        Destination; overwritten if it exists. Its directory must exist and be writable
        (checked first: the error names the path).
    description : str, optional
        Free text stored under the ``description`` key.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    if isinstance(model, FiniteHorizonMDP):
        criterion = "finite_horizon"
    elif isinstance(model, TabularMDP):
        criterion = model.criterion
    else:
        raise OptplanTypeError(
            f"model must be a TabularMDP or FiniteHorizonMDP, got {type(model).__name__}"
        )
    if description is not None and not isinstance(description, str):
        raise OptplanTypeError(f"description must be a string, got {type(description).__name__}")
    path = check_writable("path", path)
    if not path.parent.is_dir():
        raise OptplanError(
            f"cannot write path {str(path)!r}: directory {str(path.parent)!r} does not exist"
        )
    doc: dict[str, Any] = {"name": model.name}
    if description is not None:
        doc["description"] = description
    doc["criterion"] = criterion
    if model.discount is not None:
        doc["discount"] = float(model.discount)
    S = model.n_states
    if not np.array_equal(model.initial, np.full(S, 1.0 / S)):
        doc["initial"] = model.initial.tolist()
    if not model.action_mask.all():
        doc["action_mask"] = model.action_mask.tolist()
    if getattr(model, "sparse", False):
        P = model.P
        doc["R"] = model.R.tolist()
        doc["P_csr"] = {
            "indptr": P.indptr.tolist(),
            "indices": P.indices.tolist(),
            "data": P.data.tolist(),
        }
    else:
        doc["P"] = model.P.tolist()
        doc["R"] = model.R.tolist()
    try:
        path.write_text(_compact(tomli_w.dumps(doc)), encoding="utf-8")
    except OSError as exc:
        raise write_error("path", path, exc) from exc
    return path


def load_counts(path, n_states: int, n_actions: int) -> np.ndarray:
    """Pseudo-counts ``T[x][a][y]`` from a TOML file (key ``T``), checked against the model.

    Example: ``models/cowan3-rigged.toml`` (the paper's rigged start, §5.1)."""
    path = Path(path)
    try:
        data = tomllib.loads(_read(path).decode("utf-8"))
    except OSError as exc:
        raise OptplanError(f"initial_counts: cannot read {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptplanError(f"initial_counts: {path} is not valid TOML: {exc}") from None
    if "T" not in data:
        error = wrong_kind(path, data, "counts")
        hint = f" ({error})" if error is not None else ""
        raise OptplanError(f"initial_counts: {path} has no key 'T' (counts T[x][a][y]){hint}")
    try:
        T = np.asarray(data["T"], dtype=float)
    except (TypeError, ValueError):
        raise OptplanError(f"initial_counts: {path}: T must be a numeric (S, A, S) array") from None
    S, A = n_states, n_actions
    if T.shape != (S, A, S):
        raise OptplanError(
            f"initial_counts: {path}: T has shape {T.shape}, expected ({S}, {A}, {S})"
        )
    return T
