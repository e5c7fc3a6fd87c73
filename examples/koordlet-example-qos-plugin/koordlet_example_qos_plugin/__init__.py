"""BEPodCPUShares: an example koordlet QoS plugin shipped as its own pip package."""
