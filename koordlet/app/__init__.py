"""The koordlet binary: flags, wiring, HTTP."""
