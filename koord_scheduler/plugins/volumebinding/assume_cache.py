"""The assume caches of PersistentVolumes and PersistentVolumeClaims (kube-scheduler
``volumebinding/passive_assume_cache.go``).

Reserve assumes the object it will write (a volume with its ``claimRef`` set, a claim with the
``selected-node`` annotation) over the watched one of the same ``resourceVersion``; every later cycle
reads the assumed copy, so a volume assumed for one pod is never offered to another. A watch event with
a newer ``resourceVersion`` replaces it (the assumed copy is dropped when read), and Unreserve
restores the watched object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from apis.core.types import ObjectMeta
from koord_scheduler.plugins.volumebinding.policy import VolumeBindingError


class _Versioned(Protocol):
    @property
    def meta(self) -> ObjectMeta: ...


T = TypeVar("T", bound=_Versioned)


class AssumeCache(Generic[T]):
    """Assumed copies over ``api`` (the watched objects, by key). ``resource`` names the plural resource
    in not-found messages, as the API server's ``NotFound`` does."""

    def __init__(self, api: Mapping[str, T], key: Callable[[T], str], resource: str) -> None:
        self._api = api
        self._key = key
        self._resource = resource
        self.assumed: dict[str, T] = {}

    def get_api(self, key: str) -> T | None:
        return self._api.get(key)

    def get(self, key: str) -> T | None:
        """The assumed copy while the watched object has its ``resourceVersion``, else the watched one."""
        stored = self._api.get(key)
        assumed = self.assumed.get(key)
        if assumed is None:
            return stored
        if stored is None or stored.meta.resource_version != assumed.meta.resource_version:
            del self.assumed[key]
            return stored
        return assumed

    def list(self, objects: Iterable[T]) -> list[T]:
        """``objects`` (watched) with assumed copies in place of those still current."""
        if not self.assumed:
            return list(objects)
        return [self.get(self._key(o)) or o for o in objects]

    def not_found(self, key: str) -> str:
        return f'{self._resource} "{key}" not found'

    def assume(self, obj: T) -> None:
        key = self._key(obj)
        stored = self._api.get(key)
        if stored is None:
            raise VolumeBindingError(self.not_found(key))
        if stored.meta.resource_version != obj.meta.resource_version:
            raise VolumeBindingError(
                f'"{key}" is out of sync (stored: {stored.meta.resource_version}, assume: {obj.meta.resource_version})'
            )
        self.assumed[key] = obj

    def restore(self, obj: T) -> None:
        key = self._key(obj)
        assumed = self.assumed.get(key)
        if assumed is not None and assumed.meta.resource_version == obj.meta.resource_version:
            del self.assumed[key]
