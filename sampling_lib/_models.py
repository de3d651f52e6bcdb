"""The four recommenders of :mod:`sampling_lib.recommenders` (KDD20 Appendix A): Popularity, ItemKNN, EASE and
ALS, with :func:`pair_scorer` and :func:`make_recommender`. Split from that module, which holds the ranks
computed from their scores and re-exports every name here (the classes keep ``sampling_lib.recommenders`` as
their module, so pickles and documentation name them there).

References
----------
KDD20 Appendix A; Steck (2019) "Embarrassingly Shallow Autoencoders for Sparse Data", WWW; Hu, Koren &
Volinsky (2008) "Collaborative Filtering for Implicit Feedback Datasets", ICDM, eqs 3-4; Takacs, Pilaszy &
Tikk (2011) "Applications of the conjugate gradient method for implicit feedback collaborative filtering",
RecSys; Deshpande & Karypis (2004) "Item-based top-N recommendation algorithms", TOIS.
"""
from __future__ import annotations

import time
import warnings
from contextlib import nullcontext

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ._validation import check_array_size, check_float, check_int
from .exceptions import ConvergenceWarning

__all__ = ["Recommender", "Popularity", "ItemKNN", "EASE", "ALS", "MODELS", "pair_scorer", "make_recommender"]


def _check_train(train, name="train") -> sp.csr_matrix:
    if not sp.issparse(train):
        train = np.asarray(train)
        if train.ndim != 2:
            raise ValueError(f"{name} must be a 2-D user x item matrix; got shape {train.shape}")
    X = sp.csr_matrix(train, dtype=np.float64)
    if X.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 items (columns); got shape {X.shape}")
    if X.nnz and (not np.all(np.isfinite(X.data)) or X.data.min() < 0):
        raise ValueError(f"{name} must hold finite non-negative interaction values")
    X = X.copy()
    X.eliminate_zeros()
    X.data[:] = 1.0  # implicit feedback: binary
    X.sort_indices()
    return X


def _dense_gram(X: sp.csr_matrix, dtype=np.float64, max_elems: int = 1 << 24) -> np.ndarray:
    """Dense C-ordered item Gram matrix X^T X, built in row blocks.

    The sparse product of a whole popular-item catalogue can hold ~N^2 nonzeros with
    index overhead (several GB at N = 20K); row blocks of X^T X (item i's co-occurrence
    counts) bound the sparse temporaries by ``max_elems`` entries, and each block is
    written into contiguous rows of the dense result (column blocks of a C-ordered
    array were strided writes, 5x slower at N = 17,632).
    """
    N = X.shape[1]
    G = np.empty((N, N), dtype=dtype)
    Xt = X.T.tocsr()
    step = max(1, max_elems // max(N, 1))
    for i in range(0, N, step):
        G[i:i + step] = (Xt[i:i + step] @ X).toarray()
    return G


def _kth_largest_per_column(col: np.ndarray, val: np.ndarray, N: int, k: int) -> np.ndarray:
    """The k-th largest of the non-negative entries ``val`` of each column (length N).

    The entries not listed are 0, so a column with fewer than k listed entries
    (N - 1 >= k) has k-th largest 0: equal to ``np.partition(S, N - k, axis=0)[N - k]``
    of the dense non-negative matrix, from its nonzeros only.
    """
    order = np.lexsort((-val, col))                  # by column, largest first
    col, val = col[order], val[order]
    cnt = np.bincount(col, minlength=N)
    first = np.r_[0, np.cumsum(cnt)[:-1]]
    out = np.zeros(N)
    has = cnt >= k
    out[has] = val[first[has] + k - 1]
    return out


class Recommender:
    """Base class: ``fit(train)`` then ``score(users)`` -> (len(users), N) float64."""

    name = "base"

    def fit(self, train) -> "Recommender":  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_fitted(self):
        if not hasattr(self, "n_items_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(train) first")

    def _users(self, users) -> np.ndarray:
        self._check_fitted()
        u = np.atleast_1d(np.asarray(users))
        if u.ndim != 1 or (u.size and (u.dtype.kind not in "iu" or u.min() < 0 or u.max() >= self.n_users_)):
            raise ValueError(f"users must be integer ids in 0..{self.n_users_ - 1}; got {users!r}"[:200])
        return u.astype(np.int64)

    def score(self, users) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def get_params(self) -> dict:
        return {}


class Popularity(Recommender):
    """Most-popular baseline: every user gets the item training counts as scores.

    Examples
    --------
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0]]))
    >>> Popularity().fit(X).score([0, 1])
    array([[1., 2., 0.],
           [1., 2., 0.]])
    """

    name = "popularity"

    def fit(self, train):
        X = _check_train(train)
        self.n_users_, self.n_items_ = X.shape
        self.item_counts_ = np.asarray(X.sum(axis=0)).ravel()
        self.fit_time_ = 0.0
        return self

    def score(self, users):
        u = self._users(users)
        return np.broadcast_to(self.item_counts_, (u.size, self.n_items_)).astype(np.float64)


class ItemKNN(Recommender):
    """Item-based cosine k-nearest-neighbour recommender.

    ``sim[i, j] = |U_i & U_j| / sqrt(|U_i| |U_j|)`` (cosine of the binary item
    columns, 0 for items without training users), zero diagonal; with
    ``neighbors=k`` only the k largest similarities of every target item j are kept.
    The score of item j for user u is ``sum_{i in I_u} sim[i, j]``.

    Parameters
    ----------
    neighbors : int or None, default None
        Number of neighbours kept per item (None = all).

    Attributes
    ----------
    sim_ : scipy.sparse.csr_matrix, shape (N, N)
        The similarity, stored sparse: one entry per co-occurring item pair
        (at most min(sum_u |I_u|^2, N^2)), so the memory follows the data,
        not N^2 (Last.fm 2K: 17,632 items, 2.3 GiB dense).

    References
    ----------
    Deshpande & Karypis (2004), TOIS; KDD20 Appendix A (itemKNN).

    Examples
    --------
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 1, 0]]))
    >>> ItemKNN().fit(X).score([1]).round(3)
    array([[0.816, 0.577, 0.577]])
    """

    name = "itemknn"

    def __init__(self, neighbors: int | None = None):
        self.neighbors = neighbors

    def get_params(self):
        return {"neighbors": self.neighbors}

    def fit(self, train):
        t0 = time.perf_counter()
        X = _check_train(train)
        self.n_users_, self.n_items_ = X.shape
        N = self.n_items_
        # refuse up front rather than let the OOM killer decide: the similarity holds one entry
        # per co-occurring item pair, at most min(sum_u |I_u|^2, N^2) (8-byte value, 4-byte index)
        deg = np.diff(X.indptr).astype(float)
        check_array_size(min(float(deg @ deg), float(N) * N), f"item-KNN's sparse item x item "
                         f"similarity (N={N} items, up to one entry per co-occurring pair)", itemsize=12)
        G = (X.T.tocsr() @ X).tocoo()                 # co-occurrence counts |U_i & U_j|
        norms = np.sqrt(np.asarray(X.sum(axis=0)).ravel())   # sqrt |U_i| = sqrt G_ii
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        i, j = G.row, G.col
        off = i != j                                  # zero diagonal
        i, j = i[off], j[off]
        S = (G.data[off] * inv[i]) * inv[j]           # the cosine, in the dense form's order
        if self.neighbors is not None:
            k = check_int(self.neighbors, "neighbors", low=1)
            if k < N - 1:
                # keep the k largest entries of each column j (neighbours of target j)
                keep = S >= _kth_largest_per_column(j, S, N, k)[j]
                i, j, S = i[keep], j[keep], S[keep]
        sim = sp.csr_matrix((S, (i, j)), shape=(N, N))
        sim.sort_indices()
        self._X = X
        self.sim_ = sim
        self.fit_time_ = time.perf_counter() - t0
        return self

    def score(self, users):
        # sparse x sparse adds the similarities of a user's items in the order of the
        # dense product (item index order), so the scores equal X_u @ dense(sim_) exactly
        u = self._users(users)
        return (self._X[u] @ self.sim_).toarray()


#: From this many items on, EASE factors its Gram matrix with one BLAS thread (see :class:`EASE`):
#: below the smallest N at which OpenBLAS's multi-threaded Cholesky crashed (15,800) by a margin
#: of 2.5x in matrix elements.
EASE_ONE_THREAD_ITEMS = 10_000


#: Rows per block where EASE's fit works through its N x N matrix (a block is this many rows of N).
_BLOCK_ROWS = 1024


def _spd_inverse_inplace(G):
    """The inverse of the symmetric positive definite C-ordered ``G``, computed in G's memory.

    LAPACK ``potrf`` (Cholesky) then ``potri`` (the inverse from the factor) on G's transpose, a
    Fortran-ordered view of the same symmetric matrix, so neither copies it; ``potri`` leaves one
    triangle, which :func:`_mirror_lower` copies to the other in row blocks. Returns a C-ordered array
    sharing G's memory (a test checks that it does). One BLAS thread from :data:`EASE_ONE_THREAD_ITEMS`
    rows (:class:`EASE`).
    """
    N = G.shape[0]
    A = G.T                                      # Fortran order, the same matrix (G is symmetric)
    potrf, potri = sla.get_lapack_funcs(("potrf", "potri"), (A,))
    with _one_blas_thread_from(N, EASE_ONE_THREAD_ITEMS):
        c, info = potrf(A, lower=False, overwrite_a=True, clean=False)
        if info == 0:
            c, info = potri(c, lower=False, overwrite_c=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"EASE's Gram matrix X^T X + lam I is not positive definite "
                                    f"(LAPACK info {info}): raise lam")
    P = np.asfortranarray(c).T                   # C order (c is A itself: f2py did not copy it); potri's
    _mirror_lower(P)                             # upper triangle is the view's lower
    return P


def _mirror_lower(P):
    """Copy the lower triangle of the square C-ordered ``P`` onto its upper one, in place, in row blocks
    of :data:`_BLOCK_ROWS` (each block's diagonal square, then its rows right of it from the columns
    below it)."""
    N = P.shape[0]
    for a in range(0, N, _BLOCK_ROWS):
        b = min(a + _BLOCK_ROWS, N)
        sq = P[a:b, a:b]
        iu = np.triu_indices(b - a, 1)
        sq[iu] = sq.T[iu]
        if b < N:
            P[a:b, b:] = P[b:, a:b].T


def _one_blas_thread_from(N, threshold):
    """Context: BLAS limited to one thread when ``N >= threshold``, else no change."""
    if N < threshold:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


class EASE(Recommender):
    """EASE^R, Steck (2019): closed-form item-item linear autoencoder.

    ``G = X^T X + lambda I``, ``P = G^{-1}`` from its Cholesky factor (LAPACK
    ``potrf`` then ``potri``, both in G's own memory; never ``inv``),
    ``B = I - P diag(1/diag(P))`` i.e. ``B_ij = -P_ij / P_jj`` off the diagonal and
    ``B_jj = 0``. Scores are ``X_u B``. The dense N x N matrix is inherent to EASE, and
    the fit holds one (plus row blocks): 3.2 GB in float64 at N = 20K, 13.4 GB at
    N = 41K, half with ``dtype=np.float32``. (A solve against the identity held two.)

    From :data:`EASE_ONE_THREAD_ITEMS` items on, the factorization and the inversion
    run with BLAS limited to one thread, whatever thread count the process or the user
    set: OpenBLAS 0.3.31 (the wheels' BLAS) crashed the process with a segmentation
    fault in its multi-threaded ``dpotrf`` from N = 15,800 on the 2-core reference
    machine, with 2, 3 or 4 threads, upper or lower, while one thread factored
    N = 17,632 in 42 s (OpenMathLib/OpenBLAS issues 352 and 2562 report the same at
    larger N). ``potri``'s parallel triangular inverse and product are built like
    ``potrf``'s, so they get the same limit. One thread costs about 1.4x at N = 14,000
    (18.6 s against 13.4 s for the factorization).

    Parameters
    ----------
    lam : float, default 200.0
        L2 regularisation lambda (Steck 2019 eq 8; ~200-500 on MovieLens).
    dtype : numpy float dtype, default float64

    References
    ----------
    Steck (2019), WWW, eqs 3-8; KDD20 Appendix A (EASE).

    Examples
    --------
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 1, 0]]))
    >>> m = EASE(lam=1.0).fit(X)
    >>> bool(np.allclose(np.diag(m.B_), 0))
    True
    """

    name = "ease"

    def __init__(self, lam: float = 200.0, dtype=np.float64):
        self.lam = lam
        self.dtype = dtype

    def get_params(self):
        return {"lam": self.lam}

    def fit(self, train):
        t0 = time.perf_counter()
        lam = check_float(self.lam, "lam", low=0, low_open=True)
        X = _check_train(train)
        self.n_users_, self.n_items_ = X.shape
        N = self.n_items_
        # refuse up front rather than let the OOM killer decide (EASE holds one N x N matrix)
        check_array_size((N, N), f"EASE's dense item x item matrix (N={N} items)",
                         itemsize=np.dtype(self.dtype).itemsize)
        G = _dense_gram(X, self.dtype)
        G[np.diag_indices(N)] += lam
        P = _spd_inverse_inplace(G)          # G's memory: no second N x N matrix
        d = np.diag(P).copy()
        for a in range(0, N, _BLOCK_ROWS):   # in row blocks: no N x N temporary
            P[a:a + _BLOCK_ROWS] /= -d[None, :]
        P[np.diag_indices(N)] = 0.0
        # C order (P is): scipy's sparse @ dense ravels the dense operand, which copies an F-ordered
        # N x N matrix on every scoring call
        self.B_ = P
        self._X = X.astype(self.dtype)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def score(self, users):
        u = self._users(users)
        return np.asarray(self._X[u] @ self.B_, dtype=np.float64)


class ALS(Recommender):
    """Implicit-feedback ALS (Hu, Koren & Volinsky 2008) with conjugate-gradient steps.

    Minimises ``sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + reg (|X|^2 + |Y|^2)`` with
    ``p_ui = 1`` on observed pairs (0 elsewhere) and confidence ``c_ui = 1 + alpha``
    on observed pairs (1 elsewhere) (Hu et al. eq 3). Each half-step solves the
    normal equations ``(Y^T Y + Y^T (C^u - I) Y + reg I) x_u = Y^T C^u p(u)`` (Hu
    et al. eq 4) with ``cg_steps`` warm-started conjugate-gradient iterations per
    user (Takacs et al. 2011), vectorised over all users at once: the matrix-vector
    products use ``Y^T Y`` plus one sparse product over the observed pairs, so a
    sweep costs O(nnz f + (M+N) f^2). ``solver="exact"`` solves every user's f x f
    system directly (slow loop, used to test the CG solver).

    Why not the ``implicit`` package: it needs a compiled extension (C++/Cython,
    optional CUDA), which the project avoids as a dependency; at the sizes of this
    suite (<= 1e5 users, 2e4 items) the numpy CG version takes seconds.

    Stopping: sweeps stop when the relative decrease of the objective falls below
    ``tol`` or after ``iterations`` sweeps; ``loss_trace_`` holds the objective after
    each sweep and ``n_iter_`` the number of sweeps. If ``tol > 0`` and it is not
    reached, a :class:`~sampling_lib._validation.ConvergenceWarning` is emitted.

    Parameters
    ----------
    factors : int, default 32
    reg : float, default 0.1
    alpha : float, default 10.0
    iterations : int, default 15
    tol : float, default 0 (run all sweeps, no warning)
    cg_steps : int, default 3
    solver : {"cg", "exact"}
    rng : None, int or Generator, keyword-only (initial factors ~ N(0, 0.01^2))

    References
    ----------
    Hu, Koren & Volinsky (2008), ICDM, eqs 3-4; Takacs, Pilaszy & Tikk (2011), RecSys,
    Algorithm 3; KDD20 Appendix A (ALS).

    Examples
    --------
    >>> X = sp.random(30, 20, density=0.2, random_state=0, format="csr")
    >>> m = ALS(factors=4, iterations=5, rng=0).fit(X)
    >>> m.score([0]).shape, bool(np.all(np.diff(m.loss_trace_) <= 1e-9 * m.loss_trace_[0]))
    ((1, 20), True)
    """

    name = "als"

    def __init__(self, factors: int = 32, reg: float = 0.1, alpha: float = 10.0,
                 iterations: int = 15, tol: float = 0.0, cg_steps: int = 3,
                 solver: str = "cg", *, rng=None):
        self.factors = factors
        self.reg = reg
        self.alpha = alpha
        self.iterations = iterations
        self.tol = tol
        self.cg_steps = cg_steps
        self.solver = solver
        self.rng = rng

    def get_params(self):
        return {"factors": self.factors, "reg": self.reg, "alpha": self.alpha,
                "iterations": self.iterations, "tol": self.tol, "cg_steps": self.cg_steps,
                "solver": self.solver}

    # --- objective -----------------------------------------------------------
    def _loss(self, X, Y, R):
        rows = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
        s = np.einsum("ij,ij->i", X[rows], Y[R.indices])
        total = np.sum((X.T @ X) * (Y.T @ Y))
        total += np.sum((1.0 + self.alpha) * (1.0 - s) ** 2 - s ** 2)
        total += self.reg * (np.sum(X * X) + np.sum(Y * Y))
        return float(total)

    # --- one half-step --------------------------------------------------------
    def _update(self, X, Y, R):
        """Update the rows of X given Y; R is the (rows of X) x (rows of Y) CSR."""
        f = Y.shape[1]
        YtY = Y.T @ Y + self.reg * np.eye(f)
        rows = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))
        cols = R.indices
        Yc = Y[cols]
        # b_u = (1 + alpha) sum_{i in obs(u)} y_i
        b = (1.0 + self.alpha) * (R @ Y)
        if self.solver == "exact":
            out = np.empty_like(X)
            for u in range(R.shape[0]):
                idx = R.indices[R.indptr[u]:R.indptr[u + 1]]
                Yu = Y[idx]
                A = YtY + self.alpha * (Yu.T @ Yu)
                out[u] = sla.solve(A, b[u], assume_a="pos")
            return out

        def matvec(V):
            s = np.einsum("ij,ij->i", V[rows], Yc)
            W = sp.csr_matrix((self.alpha * s, R.indices, R.indptr), shape=R.shape)
            return V @ YtY + W @ Y

        X = X.copy()
        r = b - matvec(X)
        p = r.copy()
        rs = np.einsum("ij,ij->i", r, r)
        for _ in range(self.cg_steps):
            Ap = matvec(p)
            pAp = np.einsum("ij,ij->i", p, Ap)
            a = np.divide(rs, pAp, out=np.zeros_like(rs), where=pAp > 0)
            X += a[:, None] * p
            r -= a[:, None] * Ap
            rs_new = np.einsum("ij,ij->i", r, r)
            beta = np.divide(rs_new, rs, out=np.zeros_like(rs), where=rs > 0)
            p = r + beta[:, None] * p
            rs = rs_new
        return X

    def fit(self, train):
        t0 = time.perf_counter()
        f = check_int(self.factors, "factors", low=1)
        check_float(self.reg, "reg", low=0)
        check_float(self.alpha, "alpha", low=0)
        iters = check_int(self.iterations, "iterations", low=1)
        check_int(self.cg_steps, "cg_steps", low=1)
        tol = check_float(self.tol, "tol", low=0)
        if self.solver not in ("cg", "exact"):
            raise ValueError(f"solver must be 'cg' or 'exact'; got {self.solver!r}")
        R = _check_train(train)
        Rt = R.T.tocsr()
        self.n_users_, self.n_items_ = R.shape
        rng = np.random.default_rng(self.rng)
        X = 0.01 * rng.standard_normal((self.n_users_, f))
        Y = 0.01 * rng.standard_normal((self.n_items_, f))
        trace = []
        converged = False
        for it in range(iters):
            X = self._update(X, Y, R)
            Y = self._update(Y, X, Rt)
            trace.append(self._loss(X, Y, R))
            if tol > 0 and it > 0 and (trace[-2] - trace[-1]) <= tol * abs(trace[-2]):
                converged = True
                break
        self.user_factors_, self.item_factors_ = X, Y
        self.loss_trace_ = np.asarray(trace)
        self.n_iter_ = len(trace)
        self.converged_ = converged
        if tol > 0 and not converged:
            rel = (trace[-2] - trace[-1]) / abs(trace[-2]) if len(trace) > 1 else np.nan
            warnings.warn(
                f"ALS did not reach tol={tol:g} in {iters} sweeps (last relative decrease "
                f"{rel:.3g}, loss {trace[-1]:.6g})", ConvergenceWarning, stacklevel=2)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def score(self, users):
        u = self._users(users)
        return self.user_factors_[u] @ self.item_factors_.T


MODELS = {"popularity": Popularity, "itemknn": ItemKNN, "ease": EASE, "als": ALS}


def pair_scorer(model):
    """A fitted recommender as the ``score(users, items) -> scores`` of :func:`sampling_lib.evaluate`.

    Each call scores the rows of the distinct users of the batch (``model.score``, the user's whole row,
    as the model computes it) and returns the entries of the asked (user, item) pairs; ALS takes the pairs'
    inner products directly. So the scores are exactly those full ranking uses (same ties).

    Examples
    --------
    >>> X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0]]))
    >>> pair_scorer(Popularity().fit(X))(np.array([0, 1, 1]), np.array([2, 0, 1]))
    array([0., 1., 2.])
    """
    model._check_fitted()

    def score(users, items):
        users = np.asarray(users, dtype=np.int64)
        items = np.asarray(items, dtype=np.int64)
        if isinstance(model, ALS):
            return np.einsum("ij,ij->i", model.user_factors_[users], model.item_factors_[items])
        uniq, row = np.unique(users, return_inverse=True)
        out = np.empty(users.size)
        step = max(1, (1 << 22) // max(model.n_items_, 1))          # ~32 MB of score rows at a time
        for a in range(0, uniq.size, step):
            sel = (row >= a) & (row < a + step)
            S = model.score(uniq[a:a + step])
            out[sel] = S[row[sel] - a, items[sel]]
        return out

    return score


def make_recommender(name: str, **params) -> Recommender:
    """Build a recommender by name (``"popularity"``, ``"itemknn"``, ``"ease"``, ``"als"``).

    Examples
    --------
    >>> make_recommender("ease", lam=100.0)
    EASE(lam=100.0)
    """
    key = str(name).lower().replace("-", "").replace("_", "")
    if key not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}; got {name!r}")
    return MODELS[key](**params)


for _cls in (Recommender, Popularity, ItemKNN, EASE, ALS):
    _cls.__module__ = "sampling_lib.recommenders"
