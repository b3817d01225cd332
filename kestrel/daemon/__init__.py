"""The daemon's control protocol (pure msgspec records shared by `kestrel ctl` and the server).

The server itself (socket, store, recovery) lives in `actors.daemon`; see docs/daemon.md.
"""

from kestrel.daemon.protocol import MAX_LINE, PROTOCOL_VERSION

__all__ = ["MAX_LINE", "PROTOCOL_VERSION"]
