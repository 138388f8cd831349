"""The C engine in this process (ctypes over libcolibri) and what drives it: colibri-generate,
sampling and chat templates."""
