"""NodeVolumeLimits: a node takes no more CSI volumes than its drivers can attach."""
