"""PrioritySort: activeQ order by pod priority, then FIFO."""
