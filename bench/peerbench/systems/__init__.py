"""One adapter per system under test, each keeping the ``peerbench.system.System`` protocol."""
