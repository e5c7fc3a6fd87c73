"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""
