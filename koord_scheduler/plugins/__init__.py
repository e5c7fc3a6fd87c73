"""In-tree plugins, one package each, and ``in_tree_registry()``."""
