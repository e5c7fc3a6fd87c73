"""SchedulingGates: keeps pods with ``spec.schedulingGates`` out of activeQ."""
