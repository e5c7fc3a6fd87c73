"""The cluster controllers' flags (see :mod:`.controllers` for what they run).

Apart from :mod:`.controllers` so that parsing the command line loads none of the controllers.
``DEFAULT_CONFIG_NAMESPACE`` and ``CONFIG_MAP_NAME`` repeat ``apis.configuration``'s values for the same
reason; a test keeps them equal.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from koord_scheduler.framework.errors import SchedulerError
from koord_scheduler.scheduler.controllers.selection import (
    DESCHEDULER,
    NODERESOURCE_PLUGINS,
    RESERVATION,
    ControllerSelectionError,
    parse_controllers,
    parse_noderesource_plugins,
)

CONFIG_MAP_NAME = "slo-controller-config"
DEFAULT_CONFIG_NAMESPACE = "koordinator-system"


class ControllerFlagError(SchedulerError):
    """A bad ``--controllers`` or ``--noderesource-plugins`` value (reported as one line, exit 2)."""


@dataclass(frozen=True, slots=True)
class ControllerFlags:
    enabled: frozenset[str]
    scheduling: bool
    config_namespace: str
    config_name: str
    noderesource_plugins: frozenset[str] = frozenset(NODERESOURCE_PLUGINS)
    descheduler_config: str = ""
    """``--descheduler-config``: the DeschedulerConfiguration file (the ``descheduler`` controller needs it)."""


def add_controller_flags(parser: argparse.ArgumentParser, parse_bool: type | object) -> None:
    parser.add_argument(
        "--controllers",
        default="*",
        metavar="LIST",
        help="controllers to run, kube-controller-manager style: '*' (all on by default, default), "
        "'name', '-name'; names: reservation, nodeslo, noderesource, nodemetric, elasticquota, "
        "podgroup, deviceresource, quotaprofile, and colocationprofile, migration and descheduler "
        "(off unless named) "
        "(only the leader acts)",
    )
    parser.add_argument(
        "--scheduling",
        nargs="?",
        const=True,
        default=True,
        type=parse_bool,  # type: ignore[arg-type]
        metavar="BOOL",
        help="schedule pods (default true); false: run only the controllers",
    )
    parser.add_argument(
        "--config-namespace",
        default=DEFAULT_CONFIG_NAMESPACE,
        help=f"namespace of the {CONFIG_MAP_NAME} ConfigMap (default {DEFAULT_CONFIG_NAMESPACE})",
    )
    parser.add_argument(
        "--descheduler-config",
        default="",
        metavar="FILE",
        help="DeschedulerConfiguration (descheduler/v1alpha2) for the descheduler controller",
    )
    parser.add_argument(
        "--slo-config-name",
        default=CONFIG_MAP_NAME,
        help=f"name of the colocation ConfigMap (default {CONFIG_MAP_NAME})",
    )
    parser.add_argument(
        "--noderesource-plugins",
        default="*",
        metavar="LIST",
        help="the noderesource controller's plugins, Koordinator style: '*' (all, default), "
        f"'Name', '-Name'; names: {', '.join(NODERESOURCE_PLUGINS)}",
    )


def controller_flags(ns: argparse.Namespace) -> ControllerFlags:
    try:
        enabled = parse_controllers(ns.controllers)
        plugins = parse_noderesource_plugins(ns.noderesource_plugins)
    except ControllerSelectionError as exc:
        raise ControllerFlagError(str(exc)) from None
    if not ns.reservation_controller:
        enabled -= {RESERVATION}
    if DESCHEDULER in enabled:
        if not ns.descheduler_config:
            raise ControllerFlagError("--controllers: descheduler needs --descheduler-config FILE")
        from apis.config.descheduler import load_descheduler_config
        from apis.config.errors import ConfigError

        try:
            load_descheduler_config(ns.descheduler_config)
        except ConfigError as exc:
            raise ControllerFlagError(str(exc)) from None
    return ControllerFlags(
        enabled,
        bool(ns.scheduling),
        ns.config_namespace,
        ns.slo_config_name,
        plugins,
        descheduler_config=ns.descheduler_config,
    )
