"""DefaultPreemption: when no node fits, preempt lower-priority pods on the best node."""
