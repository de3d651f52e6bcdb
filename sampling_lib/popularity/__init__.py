"""Popularity-sampled negatives: the sampled-rank law, Horvitz-Thompson and corrected metrics.

Sequential-recommendation papers often rank each test user's held-out item
against n - 1 negatives drawn with probability proportional to item
popularity (RecBole ``popN``, the BERT4Rec / aprec protocols) instead of
uniformly. None of the seed papers (KDD20, AAAI21, TORS24, KR20) covers this
case; everything below is derived here (sampling-lab's own results) and
verified in notebook 11 and ``tests/test_popularity.py``.

Setting and notation
--------------------
User u has a held-out item i_u and a history H_u (training items). Item j has
a weight w_j >= 0 (popularity^alpha). The user's **candidates** are the items
with w_j > 0 that are neither in H_u nor the held-out item; N_u = 1 + their
number. Negatives are drawn from the candidates with probabilities

    q_j = w_j / sum_{k candidate} w_k                                   (1)

(the weights renormalised after excluding the history *and the held-out
item*). A_u is the set of candidates ranked above the held-out item by the
model (with the tie rule: "pessimistic" counts equal scores as above), so the
global rank among the candidates is R_u = 1 + |A_u|, and

    Q_u = sum_{j in A_u} q_j                                            (2)

is the q-mass above the held-out item.

**The law (with replacement).** The n - 1 draws are i.i.d. from q; each lands
in A_u with probability Q_u, independently, so the number X_u = r_u - 1 of
sampled negatives ranked above the held-out item is

    X_u ~ Binomial(n - 1, Q_u).                                         (3)

Under uniform q (alpha = 0), Q_u = (R_u - 1)/(N_u - 1) and (3) is KDD20 eq 6.
Under popularity q the sampled rank identifies Q_u, not R_u: a model that
ranks popular items high has a large Q_u for a given R_u (it looks worse than
under uniform sampling), a model that ranks niche items high looks better.

**Horvitz-Thompson (with the negatives logged).** For the draws j_1..j_{n-1},

    A_hat_u = 1/(n - 1) sum_k 1[j_k in A_u] / q_{j_k}                   (4)

has E[A_hat_u] = sum_{j in A_u} q_j / q_j = |A_u| = R_u - 1 (unbiased) and
Var[A_hat_u] = (sum_{j in A_u} 1/q_j - |A_u|^2) / (n - 1). It needs every
candidate to have q_j > 0 (items of weight 0 are not candidates: the target is
the rank among the items that can be sampled).

**What RecBole popN does** (``recbole/sampler/sampler.py``, ``Sampler`` and
``RepeatableSampler``; ``recbole/config/configurator.py``, ``eval_args``
mode ``popN``): weights are the interaction counts over train + valid + test
raised to ``alpha`` (default 1), drawn by an alias table **with replacement**;
a draw that hits one of the user's "used" items is redrawn (rejection), which
is exactly (1) with the exclusion set = the used items. For general
recommenders the used items are the user's positives of all phases up to the
evaluated one (history and held-out item excluded, as here); for sequential
models (``repeatable=True``) only the target item is excluded, i.e. the
history *can* be drawn: pass no exclusions to reproduce that. Items with no
interaction have weight 0 and are never drawn.

**Without replacement** (aprec-style ``choice(replace=False, p=q)``, i.e.
successive sampling) the inclusion probabilities are not (n - 1) q_j and have
no closed form, and X_u is not a function of Q_u alone (it depends on every
individual q_j of A_u). The sampler can draw such negatives, but the
estimators reject them with a ValueError.

**What is identifiable.** Without the logged negatives, the sampled ranks only
identify the distribution of Q_u (and, as for uniform sampling, only its
first n - 1 moments, KDD20 Sec 2.2, AAAI21 Sec 3). The map from Q_u to R_u
depends on *which* items the model puts above the held-out item and is not
identified: given Q_u, R_u - 1 lies between k_min(Q_u), the fewest candidates
whose mass reaches Q_u (most popular first), and k_max(Q_u), the most
candidates whose mass stays below Q_u (least popular first). These sharp
bounds hold for every model (:func:`mass_rank_bounds`); "pretend the sampling
was uniform" picks the curve R - 1 = Q (N_u - 1) inside them, which is right
only for models whose ranking is independent of popularity.

**With the logs: the rank-mass curve.** Order a user's candidates by score;
the fraction rho_u(Q) of candidates whose q-mass position (mass of the
candidates above them) is below Q satisfies rho_u(Q) = int_0^Q psi_u(m) dm
with psi_u = 1/((N_u - 1) q) at mass position m. A draw lands at a
Uniform(0, 1) mass position and carries psi = 1/((N_u - 1) q_j), so pooling
the logged draws of all users estimates the average curve rho(Q) (an HT
estimate, eq 4 with a moving threshold). A draw's mass position is not
observed, but the number x of the user's other n - 2 draws ranked above it is
Binomial(n - 2, m), so its posterior given x (uniform prior) is
Beta(x + 1, n - 1 - x); the curve is estimated as

    rho_hat(Q) = sum_draws psi_k BetaCDF(Q; x_k + 1, n - 1 - x_k) / sum_draws psi_k     (5)

(users weighted equally; the denominator is the HT estimate of 1). With
uniform q every psi_k = 1 and, ties among draws broken by the log order, the
x_k of a user are a permutation of 0..n - 2, so rho_hat(Q) = Q exactly.

**Corrected estimator** (``pop_mle``): the model R_u - 1 = (N_u - 1)
rho(Q_u) with the estimated curve, and X_u ~ Binomial(n - 1, Q_u). The
distribution of rho_u = (R_u - 1)/(N_u - 1) on the grid a/(N - 1),
a = 0..N - 1 (N = max N_u) is fitted by EM (the AAAI21 eqs 18-21 mixture with
the kernel Binomial(x; n - 1, G(rho)), G = rho_hat^{-1}); each user's rank
is then averaged over its posterior (which accounts for the binomial noise of
X_u) and mapped to R = 1 + round(rho (N_u - 1)). With G the identity this is
the "uniform-pretend" correction (``uniform``), which equals the library's
MLE (AAAI21 eq 21) when all N_u are equal. ``ht`` is the plug-in: the metric
of the rounded HT rank 1 + A_hat_u (eq 4), clipped to 1..N_u.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2, eq 6 (the uniform special case of (3)).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 14, 18-21 (mixture model and EM).
.. [HT52] Horvitz, Thompson. A generalization of sampling without replacement
   from a finite universe. JASA 47 (1952) (the estimator (4)).
.. [PM22] Petrov, Macdonald. A Systematic Review and Replicability Study of
   BERT4Rec for Sequential Recommendation. RecSys 2022 (popularity-sampled
   vs uniform vs full metrics).
"""

from ._logs import (WITHOUT_REPLACEMENT, PopularityLog, as_logs, canonical_order, check_draws, is_popularity_input,
                    popularity_log, popularity_logs_from_table)
from ._sampler import sample_popularity_negatives
from ._truth import (PopularityTruth, RankMassCurve, bernstein_tolerance, exact_rank_mass_curve, mass_grid,
                     mass_rank_bounds, popularity_truth, simulate_popularity_log, simulate_popularity_ranks,
                     user_mass_rank_bounds)
from ._weights import check_item_weights, popularity_weights, read_item_weights

# WITHOUT_REPLACEMENT, check_draws and mass_grid are importable from here as before (sampling_lib.counts and
# sampling_lib.estimators use them) but, as before, not part of __all__.
__all__ = [
    "popularity_weights",
    "check_item_weights",
    "read_item_weights",
    "sample_popularity_negatives",
    "PopularityLog",
    "popularity_log",
    "popularity_logs_from_table",
    "canonical_order",
    "PopularityTruth",
    "popularity_truth",
    "simulate_popularity_log",
    "simulate_popularity_ranks",
    "RankMassCurve",
    "exact_rank_mass_curve",
    "mass_rank_bounds",
    "user_mass_rank_bounds",
    "bernstein_tolerance",
    "is_popularity_input",
    "as_logs",
]
