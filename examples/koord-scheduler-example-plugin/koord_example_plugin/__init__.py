"""An example out-of-tree koord-scheduler plugin."""
