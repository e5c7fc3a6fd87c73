"""NodeName: a pod with ``spec.nodeName`` fits only that node."""
