r"""numba-compiled functions made on first use (optional: ``pip install "optplan[jit]"``).

A :class:`Jit` collects the functions of one or more modules that numba compiles, each with
its own ``numba.njit`` options on top of the collection's, and compiles them together the
first time one is asked for (under a lock), so that importing optplan never imports numba::

    jit = Jit('kernel "numba"', cache=True, nogil=True, error_model="numpy")

    @jit(inline="always")
    def _helper(x): ...

    @jit
    def _rows(P, out): ...  # calls _helper

    jit.compiled()["_rows"](P, out)  # {name: compiled function}

numba resolves a compiled function's callees from the globals of the module the caller is
defined in, when it compiles the caller. :meth:`Jit.compiled` therefore rebinds each compiled
function, under its name, in the module that defines it and in every module of the collection
that imported it under that name, before anything is compiled: a caller then finds the
compiled callee where it finds the Python one. Functions of other collections it calls are
listed in ``uses`` and rebound the same way.

The first compile of a collection in a process that numba does not serve from its on-disk
cache prints one line on stderr, ``optplan: numba is compiling ...``: which kernels and about
how long it takes (a pause of several seconds would otherwise look like a hang). Later runs
load the compiled code from the cache and say nothing. The environment variable
``OPTPLAN_JIT_NOTICE=0`` (or ``optplan._jit.NOTICE = False``) silences it.

numba keys its cache on the source file of the function it compiles only. When a collection
spans several files (its own and those of ``uses``), each function's cache is also keyed on a
hash of all of them, so that a change in a callee's file recompiles its callers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["AVAILABLE", "INSTALL", "Jit", "njit", "available", "compile_seconds", "cache_dir"]

#: numba is installed (the optional ``jit`` extra). Found without importing numba.
AVAILABLE = importlib.util.find_spec("numba") is not None

#: How to get numba, for error messages.
INSTALL = 'pip install "optplan[jit]"'

# One lock for every collection: compiling one may compile those it uses first.
_LOCK = threading.RLock()

#: Print the first-compile notice on stderr (one line per collection and process); off with
#: the environment variable ``OPTPLAN_JIT_NOTICE=0``.
NOTICE = os.environ.get("OPTPLAN_JIT_NOTICE", "1") != "0"

# How long a first compile takes, for the notice. Measured on 2 shared cores (load 1.2-2.2),
# numba 0.68.1, OPENBLAS_NUM_THREADS=1, each with an empty cache (then again with the same
# cache: the time the cache leaves); a command's notices together, three runs:
#   NUMBA_CACHE_DIR=$(mktemp -d) /usr/bin/time optplan demo
#                                                8.9-9.6 s CPU (9.1-9.7 s wall); 1.4-1.5 s
#   NUMBA_CACHE_DIR=$(mktemp -d) /usr/bin/time optplan run --agent mdp-ucb --env riverswim \
#       --steps 3000                            9.4-10.3 s CPU (9.5-10.4 s wall); 1.4-1.5 s
#   NUMBA_CACHE_DIR=$(mktemp -d) /usr/bin/time python -c "import numpy as np, optplan as op;
#       op.KLBallIndex(np.array([.5, .5]), np.array([0., 1.]), 0.1).solve()"
#                                                              7.9 s CPU (7.9 s wall)
ESTIMATE = "about 5-10 s of CPU in all"

# id(python function) -> its collection, for the compile listener (the functions are kept
# alive by their collection's ``functions``).
_OWNERS: dict[int, Jit] = {}
_LISTENING = False
# numba's outermost compiles in this process: how deep the current one is, when it started,
# and the seconds of those that ended (numba compiles under one lock: one at a time).
_COMPILING = {"depth": 0, "start": 0.0, "seconds": 0.0}


def njit(fn: Callable | None = None, /, **options):
    """``numba.njit`` with optplan's options: ``cache=True`` (in :func:`cache_dir`) and
    ``error_model="numpy"`` (a division by zero gives ``inf`` or ``nan``, as in NumPy, instead
    of a check on every division); ``options`` override them (``inline="always"``, ...)."""
    import numba

    _listen(numba)
    cache_dir(numba)
    options = {"cache": True, "error_model": "numpy", **options}
    if fn is None:
        return numba.njit(**options)
    return numba.njit(**options)(fn)


_CACHE: dict[str, str] = {}


def cache_dir(numba=None) -> str:
    """Where numba caches optplan's compiled functions: ``$NUMBA_CACHE_DIR`` when set, else
    ``<user cache>/optplan/numba/<key>``, the key a hash of the source files that hold
    compiled code. numba checks a cached function against its own file only, so a compiled loop
    inlined from another module would otherwise load stale after that module changed."""
    if "dir" in _CACHE:
        return _CACHE["dir"]
    if numba is None:
        import numba
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        _CACHE["dir"] = user
        return user
    root = Path(__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if b"_jit" in text or b"njit" in text:  # the modules with compiled code
            h.update(path.relative_to(root).as_posix().encode())
            h.update(text)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    where = os.path.join(base, "optplan", "numba", h.hexdigest()[:16])
    numba.config.CACHE_DIR = where
    _CACHE["dir"] = where
    return where


def available() -> bool:
    """Whether numba is installed (:data:`AVAILABLE`; numba is not imported)."""
    return AVAILABLE


def compile_seconds() -> float:
    """Wall seconds numba has spent compiling in this process since a :class:`Jit` collection
    was first compiled (each outermost compile once, its callees inside it; loading a function
    from numba's cache is not a compile). ``optplan bench`` reports the difference across a
    first call as that call's compile time."""
    return _COMPILING["seconds"]


class Jit:
    """The numba-compiled functions of one or more modules, compiled on first use.

    Parameters
    ----------
    what : str
        What needs numba, for the error without it: ``"<what> needs numba: pip install ..."``.
    uses : tuple of Jit
        Collections whose functions these call: compiled first, and their compiled functions
        rebound in this collection's modules wherever a global names the Python function.
    setup : callable, optional
        ``setup(numba) -> {name: object}``: objects the compiled code reads as globals that
        only exist once numba is imported (``numba.objmode``, intrinsics); bound in every
        module of the collection before anything compiles.
    **options
        ``numba.njit`` options of every function of the collection (``cache``, ``nogil``,
        ``error_model``, ...); a function's own options (:meth:`register`) override them.
    """

    def __init__(
        self,
        what: str,
        *,
        uses: tuple[Jit, ...] = (),
        setup: Callable[[Any], Mapping[str, Any]] | None = None,
        **options,
    ):
        self.what = what
        self.uses = tuple(uses)
        self.setup = setup
        self.options = options
        #: ``(python function, name, njit options)`` in the order registered.
        self.functions: list[tuple[Callable, str, dict]] = []
        #: ``name -> compiled function``, filled by :meth:`compiled` (empty before).
        self.table: dict[str, Any] = {}
        #: Whether this process logged the first-compile notice of this collection.
        self.noticed = False

    def register(self, fn: Callable | None = None, /, *, name: str | None = None, **options):
        """Add ``fn`` (returned unchanged, so it also serves as a decorator, bare or with
        options) to the collection, compiled with the collection's options updated by
        ``options`` (``fastmath={...}``, ``inline="always"``, ...) and bound as ``name``
        (default: its own name; another name keeps the Python function where it is, e.g.
        for Python callers, and binds the compiled one beside it)."""
        if fn is None:
            return lambda f: self.register(f, name=name, **options)
        if self.table:
            raise RuntimeError(f"{fn.__qualname__} registered after {self.what} was compiled")
        self.functions.append((fn, name or fn.__name__, options))
        return fn

    __call__ = register

    def compiled(self) -> dict[str, Any]:
        """``{name: compiled function}`` of the whole collection, compiled (or loaded from
        numba's cache) on the first call; ``RuntimeError`` without numba."""
        if self.table:
            return self.table
        if not AVAILABLE:
            raise RuntimeError(f"{self.what} needs numba: {INSTALL}")
        with _LOCK:
            if not self.table:
                self._compile()
        return self.table

    def compiled_or_none(self) -> dict[str, Any] | None:
        """:meth:`compiled`, or ``None`` without numba (or when it fails to import)."""
        if self.table:
            return self.table
        if not AVAILABLE:
            return None
        try:
            return self.compiled()
        except ImportError:
            return None

    def namespaces(self) -> list[dict]:
        """The globals of the collection's modules, each once, in the order registered."""
        out: dict[int, dict] = {}
        for fn, _, _ in self.functions:
            out.setdefault(id(fn.__globals__), fn.__globals__)
        return list(out.values())

    def sources(self) -> list[str]:
        """The source files of this collection and of those it uses, sorted."""
        files = {g["__file__"] for g in self.namespaces()}
        for other in self.uses:
            files.update(other.sources())
        return sorted(files)

    def notice(self, module: str) -> None:
        """Log, once, that numba is compiling this collection (called by the compile
        listener when numba compiles one of its functions: its cache had nothing)."""
        if self.noticed or not NOTICE:
            return
        self.noticed = True
        later = "; numba caches the result for later runs" if self.options.get("cache") else ""
        print(
            f"optplan: numba is compiling the kernels of {module} for their first use: "
            f"{ESTIMATE}, once{later}",
            file=sys.stderr,
            flush=True,
        )

    def _compile(self) -> None:
        import numba

        _listen(numba)
        for fn, _, _ in self.functions:
            _OWNERS[id(fn)] = self
        spaces = self.namespaces()
        for other in self.uses:
            _rebind(other.functions, other.compiled(), spaces)
        if self.setup is not None:
            extra = self.setup(numba)
            for ns in spaces:
                ns.update(extra)
        cache_dir(numba)
        files = self.sources()
        stamp = _stamp(files) if len(files) > 1 else None
        table = {}
        for fn, name, options in self.functions:
            dispatcher = _unliteral(numba, numba.njit(**{**self.options, **options})(fn))
            table[name] = dispatcher if stamp is None else _stamped(dispatcher, stamp)
        _rebind(self.functions, table, spaces)
        # numba compiles a function at its first call: every callee is bound by then
        self.table.update(table)


def _listen(numba) -> None:
    """Listen to numba's compile events (once per process): numba raises one only when it
    compiles, not when it loads a function from its cache. Without that API, no notice."""
    global _LISTENING
    if _LISTENING:
        return
    _LISTENING = True
    try:
        event = numba.core.event
    except AttributeError:  # pragma: no cover - a numba without the event API
        return

    class _Notice(event.Listener):
        def on_start(self, ev) -> None:
            if _COMPILING["depth"] == 0:
                _COMPILING["start"] = time.perf_counter()
            _COMPILING["depth"] += 1
            fn = getattr(ev.data.get("dispatcher"), "py_func", None)
            owner = _OWNERS.get(id(fn))
            if owner is not None and not owner.noticed:
                owner.notice(fn.__module__)
            elif owner is None and fn is not None:
                _module_notice(getattr(fn, "__module__", "") or "")

        def on_end(self, ev) -> None:
            _COMPILING["depth"] -= 1
            if _COMPILING["depth"] == 0:
                _COMPILING["seconds"] += time.perf_counter() - _COMPILING["start"]

    event.register("numba:compile", _Notice())


_NOTICED: set[str] = set()


def _module_notice(module: str) -> None:
    """The first-compile notice of an optplan module's :func:`njit` functions (once)."""
    if not NOTICE or not module.startswith("optplan.") or module in _NOTICED:
        return
    _NOTICED.add(module)
    print(
        f"optplan: numba is compiling the kernels of {module} for their first use: "
        f"{ESTIMATE}, once; numba caches the result for later runs",
        file=sys.stderr,
        flush=True,
    )


def _rebind(functions, table: Mapping[str, Any], spaces: list[dict]) -> None:
    """Bind each compiled function in its defining module, and in ``spaces`` where that name
    refers to the Python function."""
    for fn, name, _ in functions:
        fn.__globals__[name] = table[name]
        for ns in spaces:
            if ns.get(name) is fn:
                ns[name] = table[name]


def _unliteral(numba, dispatcher):
    """``dispatcher`` compiled, when compiled code calls it, for the plain types of the
    arguments (``int64``, ``bool``), never for their literal types (``Literal[int](0)``).

    numba's type inference resolves a call while the types of its arguments are still being
    inferred: a counter that starts at ``0`` is first ``Literal[int](0)``, then ``int64``
    once the loop that increments it is seen, and each is a full compile of the callee and
    of everything it calls (the same machine code: a literal argument only serves
    ``numba.literally``, which no kernel uses). Without the internals this relies on, the
    dispatcher as it is."""
    base = getattr(dispatcher, "get_call_template", None)
    unliteral = getattr(getattr(numba, "core", None), "types", None)
    unliteral = getattr(unliteral, "unliteral", None)
    if base is None or unliteral is None:  # pragma: no cover - another numba's internals
        return dispatcher

    def get_call_template(args, kws):
        args = tuple(unliteral(a) for a in args)
        return base(args, {k: unliteral(t) for k, t in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher


def _stamp(files: list[str]) -> str:
    """A hash of the contents of ``files``."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def _stamped(dispatcher, stamp: str):
    """``dispatcher`` with numba's cache keyed on its file's source (numba's own stamp) and
    on ``stamp``. Without the numba internals this relies on, no cache at all (never a
    stale one)."""
    try:
        cache_file = dispatcher._cache._cache_file
        cache_file._source_stamp = (cache_file._source_stamp, stamp)
    except AttributeError:  # pragma: no cover - another numba version's internals
        from numba.core.caching import NullCache

        dispatcher._cache = NullCache()
    return dispatcher
