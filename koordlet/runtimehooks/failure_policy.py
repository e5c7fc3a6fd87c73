"""What a failed hook decision does to the container being created: Koordinator's failure policy values.

``--runtime-hooks-plugin-failure-policy`` (Koordinator's ``pkg/koordlet/runtimehooks/config.go``; its NRI
server, ``pkg/koordlet/runtimehooks/nri/handlers.go``, follows this one):

- ``Ignore`` (the default): the container is created without koordlet's values; the reconciler applies them
  at its next tick;
- ``Fail``: the NRI call answers with the error, so the runtime fails the sandbox or container creation and
  the kubelet retries it.

Any other value is refused at start, as Koordinator's ``GetFailurePolicyType`` does.
"""

from __future__ import annotations

POLICY_IGNORE = "Ignore"
POLICY_FAIL = "Fail"
FAILURE_POLICIES = (POLICY_IGNORE, POLICY_FAIL)
