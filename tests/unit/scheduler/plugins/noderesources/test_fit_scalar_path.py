"""The scalar fast path for a few nodes must give exactly what the vector path gives."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins import resource_fit as fitmod
from koord_scheduler.plugins.resource_fit import FitRequest


@pytest.mark.parametrize("seed", range(5))
def test_scalar_and_vector_paths_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    allocatable = rng.integers(0, 4000, size=(n, 3)).astype(np.int64)
    requested = rng.integers(0, 4000, size=(n, 3)).astype(np.int64)
    pod_count = rng.integers(0, 12, size=n).astype(np.int64)
    allowed = rng.integers(0, 12, size=n).astype(np.int64)
    columns, amounts = np.array([0, 2], dtype=np.intp), np.array([1500, 800], dtype=np.int64)
    fit = FitRequest(columns, amounts, ("cpu", "ephemeral-storage"))
    arrays = {"allocatable": allocatable, "requested": requested, "pod_count": pod_count, "allowed_pods": allowed}
    failing = 0
    # Sizes under half the nodes take the arrays' row-gather branch, the others the whole-array one.
    for size in (1, 3, 8, 13, 19, 20, 33, n):
        positions = rng.choice(n, size=size, replace=False).astype(np.intp)
        monkeypatch.setattr(fitmod, "_SCALAR_MAX", n)
        want_idx, want_codes = fitmod.fit_failures(fit, positions, **arrays)
        monkeypatch.setattr(fitmod, "_SCALAR_MAX", 8)
        vec_idx, vec_codes = fitmod.fit_failures_arrays(fit, positions, **arrays)
        assert want_idx.tolist() == vec_idx.tolist()
        assert want_codes.tolist() == vec_codes.tolist()
        failing += len(want_idx)
    assert failing > 0, "the draws should make some nodes fail"
