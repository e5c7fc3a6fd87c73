"""Built-in QoS plugins, one package each (``plugin.py`` for the class, ``policy.py`` for the maths)."""
