"""CgroupReconcile: BE pod/container cgroups from batch resources, and memory QoS."""
