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
    """The other side did not answer before the deadline."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline = None               # time.monotonic() past which recv gives up (TimedOut)

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
        if self.deadline is not None:
            self.sock.settimeout(max(0.001, self.deadline - time.monotonic()))
        try:
            first, fds, _, _ = socket.recv_fds(self.sock, 1, MAX_FDS)
        except TimeoutError:
            raise TimedOut("no answer before the deadline") from None
        except OSError as e:
            raise Broken(f"the other side of the job hung up ({e.strerror})") from None
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
