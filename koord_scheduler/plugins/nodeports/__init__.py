"""NodePorts: a pod's host ports must be free on the node."""
