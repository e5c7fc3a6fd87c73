"""The SchedulingHint plugin: a pod's scheduling-hint annotation narrows its nodes and names nodes to try first."""
