"""ResourceClaims as the scheduler sees them: watched, assumed after its own writes, and allocated in
flight (upstream's ``claimTracker`` over an assume cache, ``dra_manager.go``, and ``allocatedDevices``,
``allocateddevices.go``).

- The informer's claims, by ``namespace/name``.
- Assumed claims: what PreBind wrote (the API server's answer), used until the watch delivers that
  version or a newer one (resourceVersions compare as integers, as upstream's assume cache does).
- In-flight allocations: set at Reserve, dropped when PreBind has written the claim or at Unreserve.
  A claim with an in-flight allocation makes other pods that need it wait (PreFilter), and its devices
  count as allocated, so two pods of one batch never get the same device.
- Allocated devices: a reference count per device over the effective (assumed, else watched) claims,
  kept incrementally; admin-access results do not count (as upstream).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from apis.resource.types import DeviceId, ResourceClaim

_CHANGE_LOG = 4096


def _version(claim: ResourceClaim) -> int:
    try:
        return int(claim.meta.resource_version or 0)
    except ValueError:
        return 0


def _devices(claim: ResourceClaim | None) -> list[DeviceId]:
    if claim is None or claim.allocation is None:
        return []
    return [r.device_id for r in claim.allocation.results if not r.admin_access]


class ClaimTracker:
    def __init__(self) -> None:
        self.watched: dict[str, ResourceClaim] = {}
        self.assumed: dict[str, ResourceClaim] = {}
        self.in_flight: dict[str, ResourceClaim] = {}
        """claim uid -> the claim with the allocation Reserve chose."""
        self._allocated: dict[DeviceId, int] = {}
        self._in_flight_devices: dict[DeviceId, int] = {}
        self.revision = 0
        self._changes: list[tuple[int, DeviceId]] = []
        """(revision, device) for every device that became allocated or free, oldest first (bounded)."""
        self._dropped_up_to = 0
        """Changes at or before this revision may have been dropped from the log."""

    # ----- reads -----

    def get(self, key: str) -> ResourceClaim | None:
        """The effective claim (assumed, else watched)."""
        return self.assumed.get(key) or self.watched.get(key)

    def all(self) -> Iterable[ResourceClaim]:
        for key, claim in self.watched.items():
            yield self.assumed.get(key, claim)

    def has_pending_allocation(self, uid: str) -> bool:
        return uid in self.in_flight

    def is_allocated(self, device: DeviceId) -> bool:
        return device in self._allocated or device in self._in_flight_devices

    def __contains__(self, device: object) -> bool:
        return isinstance(device, DeviceId) and self.is_allocated(device)

    def allocated_devices(self) -> frozenset[DeviceId]:
        return frozenset(self._allocated) | frozenset(self._in_flight_devices)

    def changed_since(self, revision: int) -> list[DeviceId] | None:
        """Devices whose allocated state may have changed after ``revision``; None when the log no longer
        reaches back that far."""
        if revision < self._dropped_up_to:
            return None
        start = bisect.bisect_right(self._changes, revision, key=lambda change: change[0])
        return [device for _, device in self._changes[start:]]

    def _changed(self, devices: list[DeviceId]) -> None:
        if not devices:
            return
        self._changes.extend((self.revision, d) for d in devices)
        if len(self._changes) > _CHANGE_LOG:
            cut = len(self._changes) - _CHANGE_LOG // 2
            self._dropped_up_to = self._changes[cut - 1][0]
            del self._changes[:cut]

    # ----- watch events -----

    def on_watched(self, old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        key = (new or old).key  # type: ignore[union-attr]
        before = self.get(key)
        if new is None:
            self.watched.pop(key, None)
            self.assumed.pop(key, None)
        else:
            self.watched[key] = new
            assumed = self.assumed.get(key)
            if assumed is not None and _version(new) >= _version(assumed):
                del self.assumed[key]
        self._account(before, self.get(key))

    # ----- the scheduler's own writes -----

    def assume(self, claim: ResourceClaim) -> None:
        """What the API server answered to our write; ignored if the watch is already newer."""
        watched = self.watched.get(claim.key)
        if watched is not None and _version(watched) > _version(claim):
            return
        before = self.get(claim.key)
        self.assumed[claim.key] = claim
        self._account(before, claim)

    def restore(self, key: str) -> None:
        """Drop the assumed version (upstream's ``AssumedClaimRestore``)."""
        if key not in self.assumed:
            return
        before = self.get(key)
        del self.assumed[key]
        self._account(before, self.get(key))

    def signal_pending_allocation(self, claim: ResourceClaim) -> None:
        self.remove_pending_allocation(claim.uid)
        self.in_flight[claim.uid] = claim
        devices = _devices(claim)
        for device in devices:
            self._in_flight_devices[device] = self._in_flight_devices.get(device, 0) + 1
        self.revision += 1
        self._changed(devices)

    def remove_pending_allocation(self, uid: str) -> bool:
        claim = self.in_flight.pop(uid, None)
        if claim is None:
            return False
        devices = _devices(claim)
        for device in devices:
            left = self._in_flight_devices.get(device, 0) - 1
            if left > 0:
                self._in_flight_devices[device] = left
            else:
                self._in_flight_devices.pop(device, None)
        self.revision += 1
        self._changed(devices)
        return True

    def _account(self, before: ResourceClaim | None, after: ResourceClaim | None) -> None:
        self.revision += 1
        old, new = _devices(before), _devices(after)
        if old == new:
            return
        self._changed(old + new)
        for device in old:
            left = self._allocated.get(device, 0) - 1
            if left > 0:
                self._allocated[device] = left
            else:
                self._allocated.pop(device, None)
        for device in new:
            self._allocated[device] = self._allocated.get(device, 0) + 1
