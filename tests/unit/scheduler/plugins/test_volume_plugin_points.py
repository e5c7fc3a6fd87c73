"""The volume plugins and ImageLocality implement the extension points upstream's do (checked against
the framework's Protocols), and register under the names users write."""

from __future__ import annotations

from typing import Any

import pytest

from koord_scheduler.framework import interfaces as ep
from koord_scheduler.plugins.registry import in_tree_registry
from tests import storage_builders as sb
from tests.fwtest import make_snapshot


def _handle() -> Any:
    """The test handle (it offers what the volume plugins use, not the whole Handle)."""
    return sb.StorageHandle(make_snapshot([]))


POINTS: dict[str, set[type]] = {
    "VolumeRestrictions": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "NodeVolumeLimits": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "VolumeBinding": {
        ep.PreFilterPlugin,
        ep.BatchFilterPlugin,
        ep.FilterPlugin,
        ep.ReservePlugin,
        ep.PreBindPlugin,
        ep.EnqueueExtensions,
    },
    "VolumeZone": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "ImageLocality": {ep.PreScorePlugin, ep.ScorePlugin, ep.BatchScorePlugin},
}


@pytest.mark.parametrize("name", sorted(POINTS))
def test_points(name: str) -> None:
    spec = next(s for s in in_tree_registry() if s.name == name)
    plugin = spec.factory(None, _handle())
    assert plugin.name == name
    for protocol in POINTS[name]:
        assert isinstance(plugin, protocol), protocol.__name__


def test_volume_binding_scores_only_with_a_shape() -> None:
    from apis.config.plugin_args import UtilizationShapePoint, VolumeBindingArgs

    spec = next(s for s in in_tree_registry() if s.name == "VolumeBinding")
    plain = spec.factory(None, _handle())
    assert not isinstance(plain, ep.ScorePlugin) and not isinstance(plain, ep.PreScorePlugin)
    shape = (UtilizationShapePoint(utilization=0, score=10), UtilizationShapePoint(utilization=100, score=0))
    scoring = spec.factory(VolumeBindingArgs(shape=shape), _handle())
    assert isinstance(scoring, ep.ScorePlugin) and isinstance(scoring, ep.PreScorePlugin)
