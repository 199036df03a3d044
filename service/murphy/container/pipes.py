"""Pipe input mode: a channel streamed through FIFOs, as SageMaker's agent does it.

What the program sees (SageMaker's contract, as ``PipeModeDataset`` reads it): for a channel
``train`` no ``/opt/ml/input/data/train`` directory but a FIFO ``/opt/ml/input/data/train_0``;
opened and read to EOF it yields the channel's objects concatenated (keys in S3's listing order,
a manifest's entries in its order; ``ShardedByS3Key``: this host's share). Epoch ``n + 1``'s FIFO
``train_<n+1>`` exists by the time the reader sees epoch ``n``'s EOF (murphy makes it just before
closing its end, so a plain ``open()`` right after EOF does not race), or right after a reader
that closed early is noticed; a finished epoch's FIFO is removed. Epochs never run out: the
program decides how many it reads. ``RecordWrapperType=RecordIO`` wraps each object in a RecordIO
record (multi-part records of at most one chunk each, which ``PipeModeDataset`` joins);
``CompressionType=Gzip`` inflates each object as it streams.

Memory is bounded: a few object chunks at a time (one being written, one fetched ahead so that
the next GET overlaps the write, one more for RecordIO's look-ahead), nothing staged on disk.
The feeder is a daemon thread whose every wait (a reader to open, room in the pipe) polls its
stop flag, so :meth:`PipeFeeder.stop` ends it promptly and a toolkit that exits leaves nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import random
import select
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from murphy.exceptions import ObjectNotFound
from murphy.storage import ObjectStore

CHUNK = 8 << 20
RECORDIO_MAGIC = 0xCED7230A
#: RecordIO's cflag values (upper 3 bits of the length word): whole record, first / middle / last part.
_WHOLE, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3
_MAX_PART = (1 << 29) - 1


class PipeError(Exception):
    """The feeder could not stream its channel (becomes the job's failure reason)."""


@dataclass(frozen=True)
class PipeSource:
    """What one channel's FIFO carries: ``keys`` of ``store``, in this order, every epoch; with
    ``shuffle_seed`` (``ShuffleConfig``), ``keys`` is the whole channel, shuffled anew at the
    start of every epoch from the seed and the epoch, then shared out over ``hosts`` hosts (this
    one is number ``host``, 0-based): every host computes the same order, so each epoch's shares
    are disjoint and cover the channel, and a key may go to another host from one epoch to the
    next, as SageMaker's docs say of ``ShuffleConfig`` with ``ShardedByS3Key``."""

    channel: str
    store: ObjectStore
    keys: tuple[str, ...]
    record_io: bool = False
    gzip: bool = False
    shuffle_seed: int | None = None
    host: int = 0
    hosts: int = 1

    def epoch_keys(self, epoch: int) -> tuple[str, ...]:
        if self.shuffle_seed is None:
            return self.keys
        order = list(self.keys)
        random.Random(f"murphy-shuffle:{self.shuffle_seed}:{epoch}").shuffle(order)  # str seed: stable everywhere
        return tuple(order[self.host::self.hosts])


def object_chunks(store: ObjectStore, key: str, chunk: int = CHUNK) -> Iterator[bytes]:
    """``key``'s bytes by ranged reads of ``chunk`` bytes (the last one shorter, maybe empty)."""
    offset = 0
    while True:
        data = store.get(key, offset, chunk)
        yield data
        offset += len(data)
        if len(data) < chunk:
            return


def gunzip(chunks: Iterator[bytes], key: str) -> Iterator[bytes]:
    """A gzip object inflated as it streams (several gzip members in one object are all read)."""
    inflate, fed = zlib.decompressobj(wbits=31), False
    try:
        for data in chunks:
            while data:
                fed = True
                out = inflate.decompress(data, CHUNK)
                if out:
                    yield out
                data = inflate.unconsumed_tail
                if inflate.eof:  # a concatenated member starts in what is left
                    data = inflate.unused_data + data
                    inflate, fed = zlib.decompressobj(wbits=31), False
        tail = inflate.flush()
    except zlib.error as e:
        raise PipeError(f"{key} is not gzip data (CompressionType Gzip): {e}") from None
    if fed and not inflate.eof:
        raise PipeError(f"{key} is truncated gzip data (CompressionType Gzip)")
    if tail:
        yield tail


def _recordio(flag: int, payload: bytes) -> list[bytes]:
    pad = b"\0" * (-len(payload) % 4)
    return [struct.pack("<II", RECORDIO_MAGIC, (flag << 29) | len(payload)), payload, pad]


def recordio(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """One object as one RecordIO record; an object longer than a chunk is a multi-part record
    (one part per chunk: the flag of a part depends on whether another follows, hence one chunk
    of look-ahead)."""
    parts = (p[i:i + _MAX_PART] for p in chunks for i in range(0, max(len(p), 1), _MAX_PART))
    current = next(parts, b"")
    first = True
    for following in parts:
        if not following:  # a short last read, or an empty inflated piece
            continue
        yield from _recordio(_FIRST if first else _MIDDLE, current)
        current, first = following, False
    yield from _recordio(_WHOLE if first else _LAST, current)


class PipeFeeder(threading.Thread):
    """Streams ``source`` into ``<directory>/<channel>_<epoch>`` for epochs 0, 1, ... until
    stopped; ``on_error(message)`` is called once if it cannot (then it stops)."""

    def __init__(self, source: PipeSource, directory: str, on_error: Callable[[str], None],
                 chunk: int = CHUNK, poll_s: float = 0.05) -> None:
        super().__init__(name=f"murphy-pipe-{source.channel}", daemon=True)
        self.source = source
        self.directory = directory
        self.on_error = on_error
        self.chunk = chunk
        self.poll_s = poll_s
        self.epochs_done = 0
        self.error: str | None = None
        self._halt = threading.Event()

    def fifo(self, epoch: int) -> str:
        return os.path.join(self.directory, f"{self.source.channel}_{epoch}")

    def start(self) -> None:
        """Epoch 0's FIFO exists when this returns (the program may open it at once)."""
        os.makedirs(self.directory, exist_ok=True)
        _mkfifo(self.fifo(0))
        super().start()

    def stop(self, timeout: float = 5.0) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout)
        for epoch in (self.epochs_done, self.epochs_done + 1):  # FIFOs no reader will open now
            with contextlib.suppress(OSError):
                os.unlink(self.fifo(epoch))

    # ---- the thread --------------------------------------------------------------------------

    def run(self) -> None:
        fd: int | None = None
        try:
            epoch = 0
            while not self._halt.is_set():
                fd = self._open_writer(self.fifo(epoch))
                if fd is None:
                    return
                try:
                    self._feed(fd, epoch)
                except BrokenPipeError:  # the reader closed this epoch early: on to the next
                    pass
                except _Stopped:
                    return
                _mkfifo(self.fifo(epoch + 1))  # before EOF: a reader at EOF finds the next one
                os.close(fd)
                fd = None
                with contextlib.suppress(OSError):
                    os.unlink(self.fifo(epoch))
                epoch = self.epochs_done = epoch + 1
        except Exception as e:
            if not self._halt.is_set():
                self.error = _message(self.source, e)
                self.on_error(self.error)
        finally:
            # Only now does the reader see EOF: after a failure the job already knows, so a short
            # epoch can never pass for a whole one.
            if fd is not None:
                os.close(fd)

    def _open_writer(self, path: str) -> int | None:
        """``path`` open for writing once a reader has opened it (None: stopped first). Non-
        blocking, so the wait for a reader can be given up."""
        while not self._halt.is_set():
            try:
                return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
            self._halt.wait(self.poll_s)
        return None

    def _epoch(self, epoch: int) -> Iterator[bytes]:
        """One epoch's bytes, object after object, as they are to be written."""
        src = self.source
        for key in src.epoch_keys(epoch):
            chunks: Iterator[bytes] = object_chunks(src.store, key, self.chunk)
            if src.gzip:
                chunks = gunzip(chunks, key)
            if src.record_io:
                chunks = recordio(chunks)
            yield from chunks

    def _feed(self, fd: int, epoch: int) -> None:
        for data in read_ahead(self._epoch(epoch), self._halt, self.poll_s):
            self._write(fd, data)

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._halt.is_set():
                raise _Stopped
            try:
                n = os.write(fd, view)
            except BlockingIOError:  # the pipe is full: wait for the reader, or a stop
                select.select([], [fd], [], self.poll_s)
                continue
            view = view[n:]


class _Stopped(Exception):
    pass


_END = object()


def read_ahead(pieces: Iterator[bytes], halt: threading.Event, poll_s: float = 0.05) -> Iterator[bytes]:
    """``pieces``, produced one ahead by a helper thread: the next GET overlaps the write of this
    chunk into the pipe (at most one piece waiting, one being made). The producer's exception is
    raised here; a consumer that stops early (or ``halt``) ends the producer at its next piece."""
    box: queue.Queue[object] = queue.Queue(maxsize=1)
    done = threading.Event()

    def produce() -> None:
        try:
            for piece in pieces:
                if not _offer(box, piece, done, halt, poll_s):
                    return
            _offer(box, _END, done, halt, poll_s)
        except BaseException as e:
            _offer(box, e, done, halt, poll_s)

    threading.Thread(target=produce, name="murphy-pipe-read-ahead", daemon=True).start()
    try:
        while True:
            try:
                item = box.get(timeout=poll_s)
            except queue.Empty:
                if halt.is_set():
                    raise _Stopped from None
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        done.set()


def _offer(box: queue.Queue[object], item: object, done: threading.Event, halt: threading.Event,
           poll_s: float) -> bool:
    while not (done.is_set() or halt.is_set()):
        try:
            box.put(item, timeout=poll_s)
            return True
        except queue.Full:
            continue
    return False


def _mkfifo(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a stale file of that name (a restarted container) is replaced
    os.mkfifo(path, 0o600)


def _message(source: PipeSource, error: Exception) -> str:
    where = f"channel {source.channel!r} (Pipe input mode)"
    if isinstance(error, ObjectNotFound):
        return f"{where}: cannot stream {source.store.uri.rstrip('/')}/{error.key}: the object does not exist"
    if isinstance(error, PipeError):
        return f"{where}: {error}"
    return f"{where}: streaming failed: {type(error).__name__}: {error}"


def start_feeders(sources: Sequence[PipeSource], directory: str, on_error: Callable[[str], None]) -> list[PipeFeeder]:
    feeders = [PipeFeeder(s, directory, on_error) for s in sources]
    for f in feeders:
        f.start()
    return feeders
