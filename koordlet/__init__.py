"""koordlet: the node agent. Public surface for QoS plugin authors is re-exported here (see ``__all__``)."""
