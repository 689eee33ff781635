"""The line between a job's two processes: framed JSON messages, and the file descriptors of shared memory.

The judge's process (main.py) and the submission's (host.py) talk over one Unix socket: each message is a
4-byte length and a JSON object, and a message may carry file descriptors (the memory of tensors) on its
first byte. The judge reads what the submission's side sends as untrusted: a message too long, not JSON,
or with too many descriptors ends the conversation (:class:`Broken`), never the judge.
"""
import json
import os
import socket
import struct
import time

HEADER = struct.Struct("!I")
MAX_MESSAGE = 16 * 1024 * 1024            # bytes of JSON: launches and outputs are descriptions, not data
MAX_FDS = 64                              # descriptors on one message: the tensors of one launch


class Broken(Exception):
    """The other side hung up or sent something that is not a message."""


class TimedOut(Broken):
    """The other side did not answer before the deadline (``cpu``: before its budget of CPU time ran out)."""

    def __init__(self, message, cpu=False, where="", stuck=False):
        super().__init__(message)
        self.cpu = cpu
        self.where, self.stuck = where, stuck          # a kernel stopped in the judge's process: its line


SLICE_S = 0.25              # how often a wait looks at the CPU budget


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline = None               # time.monotonic() past which recv gives up (TimedOut)
        self.budget = None                 # a callable: True once the CPU budget is spent (recv then gives up)

    def send(self, message: dict, fds=()):
        data = json.dumps(message).encode()
        frame = HEADER.pack(len(data)) + data
        try:
            if fds:
                socket.send_fds(self.sock, [frame[:1]], list(fds))
                self.sock.sendall(frame[1:])
            else:
                self.sock.sendall(frame)
        except OSError as e:
            raise Broken(f"the other side of the job hung up ({e.strerror})") from None

    def recv(self) -> tuple:
        """(message, [file descriptors]): the descriptors are the receiver's to close."""
        first, fds = self._first()
        # the rest of the message follows at once; only the wall deadline bounds it
        self.sock.settimeout(None if self.deadline is None else max(0.001, self.deadline - time.monotonic()))
        try:
            if not first:
                raise Broken("the other side of the job hung up")
            (size,) = HEADER.unpack(first + self._exact(HEADER.size - 1))
            if size > MAX_MESSAGE:
                raise Broken(f"a message of {size} bytes (at most {MAX_MESSAGE})")
            message = json.loads(self._exact(size))
            if not isinstance(message, dict):
                raise Broken("a message that is not a JSON object")
        except (ValueError, UnicodeDecodeError) as e:
            close(fds)
            raise Broken(f"a message that is not JSON: {e}") from None
        except Broken:
            close(fds)
            raise
        return message, fds

    def _first(self) -> tuple:
        """The first byte of the next message and its descriptors, waiting until the deadline or, in slices,
        until the CPU budget is spent (looked at before each wait too: a side that sends without pause)."""
        while True:
            if self.budget is not None and self.budget():
                raise TimedOut("its CPU time ran out", cpu=True)
            wait = SLICE_S if self.budget is not None else None
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                wait = left if wait is None else min(wait, left)
            self.sock.settimeout(None if wait is None else max(0.001, wait))
            try:
                first, fds, _, _ = socket.recv_fds(self.sock, 1, MAX_FDS)
                return first, fds
            except TimeoutError:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise TimedOut("no answer before the deadline") from None
            except OSError as e:
                raise Broken(f"the other side of the job hung up ({e.strerror})") from None

    def _exact(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(min(n - got, 1 << 20))
            except TimeoutError:
                raise TimedOut("no answer before the deadline") from None
            if not chunk:
                raise Broken("the other side of the job hung up in the middle of a message")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


def close(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def pair() -> tuple:
    """Two connected channels' sockets: (the judge's, the submission's)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
