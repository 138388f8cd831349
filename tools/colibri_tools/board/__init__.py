"""Boards and their firmware: the board files (boards/*.toml), colibri-board, will a model fit,
HEX images, flashing, QEMU emulation, over-the-air updates and the ports' generated headers."""
