"""The volume plugins and ImageLocality implement the extension points upstream's do (checked against
the framework's Protocols), and register under the names users write."""

from __future__ import annotations

import pytest

from koord_scheduler.framework import interfaces as ep
from koord_scheduler.plugins.registry import in_tree_registry
from tests import storage_builders as sb
from tests.fwtest import make_snapshot

POINTS = {
    "VolumeRestrictions": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "NodeVolumeLimits": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "VolumeBinding": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.PreScorePlugin, ep.ScorePlugin,
                      ep.ReservePlugin, ep.PreBindPlugin, ep.EnqueueExtensions},
    "VolumeZone": {ep.PreFilterPlugin, ep.BatchFilterPlugin, ep.FilterPlugin, ep.EnqueueExtensions},
    "ImageLocality": {ep.PreScorePlugin, ep.ScorePlugin, ep.BatchScorePlugin},
}


@pytest.mark.parametrize("name", sorted(POINTS))
def test_points(name: str) -> None:
    spec = next(s for s in in_tree_registry() if s.name == name)
    plugin = spec.factory(None, sb.StorageHandle(make_snapshot([])))
    assert plugin.name == name
    for protocol in POINTS[name]:
        assert isinstance(plugin, protocol), protocol.__name__
