"""The Reservation controller names itself to kopf without the passwd database: the chart runs
koord-scheduler as uid 65532, which pykoord's image has no passwd entry for, and kopf's own default
(``getpass.getuser()``) raised KeyError there, stopping the controller. tests/node/test_chart_on_node.py
runs the image as the chart does and fails on any ERROR line koord-scheduler logs."""

from __future__ import annotations

import os

from koord_scheduler.scheduler.reservation_controller.operator import kopf_identity


def test_kopf_identity_names_host_and_process() -> None:
    assert kopf_identity() == f"koord-scheduler@{os.uname().nodename}/{os.getpid()}"
