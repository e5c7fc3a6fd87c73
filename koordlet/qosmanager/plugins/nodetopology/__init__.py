"""NodeTopologyReport: the node's NodeResourceTopology."""
