"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint."""
