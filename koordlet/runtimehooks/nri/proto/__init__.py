"""NRI's and ttrpc's ``.proto`` files and the protobuf modules generated from them at build time (``generate.py``)."""
