"""PreBind waiters are woken only by events of their own claims and volumes: each claim or volume event
carries the keys it may change (the claim, the volume it names, the claim a volume is bound to)."""

from __future__ import annotations

import pytest

from apis.core.storage import parse_claim, parse_volume
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.storageinfo.listers import StorageListers
from tests.storage_builders import claim, volume


def record(listers: StorageListers) -> list[frozenset[str]]:
    seen: list[frozenset[str]] = []
    listers.on_change.append(seen.append)
    return seen


@pytest.mark.parametrize(
    ("kind", "old", "new", "want"),
    [
        pytest.param("claim", None, claim("c1"), {"pvc:default/c1"}, id="new-claim"),
        pytest.param(
            "claim",
            claim("c1"),
            claim("c1", volume="pv-9", bound=True),
            {"pvc:default/c1", "pv:pv-9"},
            id="claim-bound-to-a-volume",
        ),
        pytest.param("volume", None, volume("pv-1"), {"pv:pv-1"}, id="new-unbound-volume"),
        pytest.param(
            "volume",
            None,
            volume("pv-2", claim_ref=("ns", "data-0")),
            {"pv:pv-2", "pvc:ns/data-0"},
            id="provisioned-volume-names-its-claim",
        ),
        pytest.param(
            "volume",
            volume("pv-3", claim_ref=("ns", "old")),
            None,
            {"pv:pv-3", "pvc:ns/old"},
            id="deleted-volume",
        ),
    ],
)
def test_event_wake_keys(kind: str, old: dict | None, new: dict | None, want: set[str]) -> None:
    listers = StorageListers()
    seen = record(listers)
    parse = parse_claim if kind == "claim" else parse_volume
    event = EventType.DELETED if new is None else (EventType.ADDED if old is None else EventType.MODIFIED)
    handler = listers.on_claim if kind == "claim" else listers.on_volume
    handler(event, parse(old) if old else None, parse(new) if new else None)
    assert seen == [frozenset(want)]


def test_candidate_volumes_find_what_the_full_scan_finds() -> None:
    """The per-pod candidate list gives find_matching_volume the same answer as every volume of the class,
    over random volumes (free, pre-bound to the claim, bound elsewhere, released, being deleted)."""
    import random

    from koord_scheduler.plugins.volumebinding.policy import candidate_volumes, find_matching_volume

    rng = random.Random(7)
    the_claim = parse_claim(claim("data", namespace="ns", size="2Gi"))
    for _ in range(300):
        raw = []
        for i in range(rng.randint(0, 8)):
            ref = rng.choice([None, ("ns", "data"), ("ns", "other")])
            phase = rng.choice(["Available", "Bound", "Released"])
            obj = volume(
                f"pv-{i}",
                size=rng.choice(["1Gi", "2Gi", "5Gi"]),
                claim_ref=ref,
                phase=phase,
                node_values=rng.choice([None, ["n1"], ["n2"]]),
            )
            if rng.random() < 0.1:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            raw.append(parse_volume(obj))
        labels = {"kubernetes.io/hostname": rng.choice(["n1", "n2"])}
        full = find_matching_volume(the_claim, raw, labels, set())
        fewer = find_matching_volume(the_claim, candidate_volumes(raw, [the_claim]), labels, set())
        assert (full.name if full else None) == (fewer.name if fewer else None)
