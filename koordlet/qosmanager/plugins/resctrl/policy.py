"""Resctrl values (Koordinator ``qosmanager/plugins/resctrl`` and ``util/resctrl``), as pure functions.

- **L3 CAT**: with ``ways = bitlen(cbm)``, a class's ``[catRangeStartPercent, catRangeEndPercent)`` becomes
  ``mask = (1 << ceil(ways*end/100)) - (1 << ceil(ways*start/100))``; the root's cbm must be contiguous from
  bit 0, and ``0 <= start < end <= 100``.
- **MBA**: ``mbaPercent`` in (0, 100]; Intel rounds up to a multiple of 10, AMD gives 2048 (unlimited) for 100
  and otherwise ``int(25*8*0.8 * pct / 100)``; outside (0, 100] nothing is written.
- A class whose ``resctrlQOS.enable`` is not true gets the "None" config (0-100 %, MBA 100), as
  Koordinator's NodeSLO merge puts it there.
- Pods go to group LSR (LSE, LSR), LS or BE by their QoS class (with the Kubernetes default); pods with the
  ``node.koordinator.sh/resctrl`` annotation get their own group ``koordlet-<pod uid>`` (the Resctrl gate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.core import boundedjson
from apis.extension import QoSClass
from apis.slo.nodeslo import ResctrlQOSCfg, ResourceQOS, ResourceQOSStrategy
from koordlet.system.resctrl import AMD_VENDOR_ID, INTEL_VENDOR_ID, Schemata

GROUP_LSR, GROUP_LS, GROUP_BE = "LSR", "LS", "BE"
GROUPS = (GROUP_LSR, GROUP_LS, GROUP_BE)
POD_GROUP_PREFIX = "koordlet-"
ANNOTATION_RESCTRL = "node.koordinator.sh/resctrl"
AMD_MAX_MB_GBPS = 25 * 8 * 0.8
AMD_UNLIMITED_MB = 2048
NONE_RESCTRL = ResctrlQOSCfg(enable=False, cat_range_start_percent=0, cat_range_end_percent=100, mba_percent=100)


class ResctrlConfigError(ValueError):
    """A cbm, a percent range or an annotation that cannot give a schemata; the message says which."""


def cat_l3_mask(cbm: int, start_percent: int, end_percent: int) -> int:
    """Koordinator's ``CalculateCatL3MaskValue``."""
    if cbm <= 0 or (cbm + 1) & cbm != 0:
        raise ResctrlConfigError(f"illegal cbm {cbm:#x}: not contiguous from bit 0")
    if start_percent < 0 or end_percent > 100 or end_percent <= start_percent:
        raise ResctrlConfigError(f"illegal l3 cat percent: start {start_percent}, end {end_percent}")
    ways = cbm.bit_length()
    start_way = math.ceil(ways * start_percent / 100)
    end_way = math.ceil(ways * end_percent / 100)
    return (1 << end_way) - (1 << start_way)


def mba_value(percent: int | None, vendor: str) -> int | None:
    """The MB schemata value for ``percent`` on this CPU vendor; ``None`` = leave MB alone."""
    if percent is None or percent <= 0 or percent > 100:
        return None
    if vendor == AMD_VENDOR_ID:
        return AMD_UNLIMITED_MB if percent == 100 else int(AMD_MAX_MB_GBPS * percent / 100)
    if percent % 10:
        return percent // 10 * 10 + 10
    return percent


def class_resctrl(strategy: ResourceQOSStrategy | None, group: str) -> ResctrlQOSCfg:
    """The group's class config, or the "None" config when the class has resctrl off."""
    if strategy is None:
        return NONE_RESCTRL
    by_group: dict[str, ResourceQOS | None] = {
        GROUP_LSR: strategy.lsr_class,
        GROUP_LS: strategy.ls_class,
        GROUP_BE: strategy.be_class,
    }
    qos = by_group.get(group)
    cfg = qos.resctrl_qos if qos else None
    return cfg if cfg is not None and cfg.enable else NONE_RESCTRL


def group_schemata(cfg: ResctrlQOSCfg, *, cbm: int, cache_ids: Sequence[int], vendor: str) -> Schemata:
    """L3 and MB for every cache id; a part that cannot be computed is left out (not written)."""
    l3: dict[int, int] = {}
    start, end = cfg.cat_range_start_percent, cfg.cat_range_end_percent
    if start is not None and end is not None:
        mask = cat_l3_mask(cbm, start, end)
        l3 = dict.fromkeys(cache_ids, mask)
    mb_value = mba_value(cfg.mba_percent, vendor)
    mb = dict.fromkeys(cache_ids, mb_value) if mb_value is not None else {}
    return Schemata(l3, mb)


def schemata_lines(want: Schemata, have: Schemata | None) -> list[str]:
    """The lines to write so ``have`` becomes ``want``; [] when it already is."""
    lines = []
    if want.l3 and (have is None or have.l3 != want.l3):
        lines.append(want.l3_line())
    if want.mb and (have is None or have.mb != want.mb):
        lines.append(want.mb_line())
    return lines


def pod_group(qos: QoSClass) -> str | None:
    """Koordinator's ``getPodResctrlGroup``: LSE/LSR → LSR, LS → LS, BE → BE, else none."""
    return {QoSClass.LSE: GROUP_LSR, QoSClass.LSR: GROUP_LSR, QoSClass.LS: GROUP_LS, QoSClass.BE: GROUP_BE}.get(qos)


def _range(raw: Any, where: str) -> tuple[int, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(v, int) for v in raw):
        raise ResctrlConfigError(f"{where}.range must be [start, end], got {raw!r}")
    return raw[0], raw[1]


def _percent(raw: Any, where: str) -> int:
    if raw is None:
        return 0
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise ResctrlConfigError(f"{where}.percent must be an integer, got {raw!r}")
    return raw


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ResctrlConfigError(f"{where} must be an object")
    return raw


@dataclass(frozen=True, slots=True)
class PodResctrlConfig:
    """The pod annotation, parsed: L3 range and MB percent for all caches, and per-cache overrides."""

    llc_range: tuple[int, int] | None = None
    llc_per_cache: tuple[tuple[int, tuple[int, int]], ...] = ()
    mb_percent: int = 0
    mb_per_cache: tuple[tuple[int, int], ...] = ()


def parse_pod_resctrl(raw: str) -> PodResctrlConfig:
    """``{"llc": {"schemata": {"range": [0, 30]}, "schemataPerCache": [{"cacheID": 0, "range": [...]}]},
    "mb": {"schemata": {"percent": 20}, "schemataPerCache": [{"cacheID": 1, "percent": 50}]}}``."""
    try:
        data = boundedjson.loads(raw)
    except ValueError as err:
        raise ResctrlConfigError(f"not JSON: {err}") from None
    data = _mapping(data, "annotation")
    llc, mb = _mapping(data.get("llc"), "llc"), _mapping(data.get("mb"), "mb")
    llc_range = _range(_mapping(llc.get("schemata"), "llc.schemata").get("range"), "llc.schemata")
    mb_percent = _percent(_mapping(mb.get("schemata"), "mb.schemata").get("percent"), "mb.schemata")
    llc_per_cache: list[tuple[int, tuple[int, int]]] = []
    for i, raw_item in enumerate(llc.get("schemataPerCache") or []):
        item = _mapping(raw_item, f"llc.schemataPerCache[{i}]")
        found = _range(item.get("range"), f"llc.schemataPerCache[{i}]")
        if found is not None:
            llc_per_cache.append((int(item.get("cacheID") or 0), found))
    mb_per_cache = [
        (int(_mapping(item, f"mb.schemataPerCache[{i}]").get("cacheID") or 0), _percent(item.get("percent"), "mb"))
        for i, item in enumerate(mb.get("schemataPerCache") or [])
    ]
    return PodResctrlConfig(llc_range, tuple(llc_per_cache), mb_percent, tuple(mb_per_cache))


def pod_schemata(cfg: PodResctrlConfig, *, cbm: int, cache_ids: Sequence[int], vendor: str) -> Schemata:
    """Koordinator's ``RDTEngine.ParseSchemata``: the whole-node values, then the per-cache ones. L3 (or MB) is
    written only when every cache id of the node gets a positive value (``ValidateL3``/``ValidateMB``), so a
    part left unset keeps the kernel's default for a new group (full L3, MB 100)."""
    l3 = dict.fromkeys(cache_ids, 0)
    mb = dict.fromkeys(cache_ids, 0)
    if cfg.mb_percent:
        value = mba_value(cfg.mb_percent, vendor)
        if value is not None:
            mb = dict.fromkeys(cache_ids, value)
    for cache_id, percent in cfg.mb_per_cache:
        mb[cache_id] = mba_value(percent, vendor) or 0
    if cfg.llc_range is not None:
        l3 = dict.fromkeys(cache_ids, cat_l3_mask(cbm, *cfg.llc_range))
    for cache_id, (start, end) in cfg.llc_per_cache:
        l3[cache_id] = cat_l3_mask(cbm, start, end)

    def valid(values: dict[int, int]) -> dict[int, int]:
        ok = bool(values) and set(values) == set(cache_ids) and all(v > 0 for v in values.values())
        return values if ok else {}

    return Schemata(valid(l3), valid(mb))


def is_known_vendor(vendor: str) -> bool:
    return vendor in (INTEL_VENDOR_ID, AMD_VENDOR_ID)
