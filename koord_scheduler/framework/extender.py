"""Transitional: the restored-capacity key moved to :mod:`koord_scheduler.framework.restored`."""

from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity

__all__ = ["RESTORED_CAPACITY", "RestoredCapacity"]
