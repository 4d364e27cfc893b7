# dropflush.py: an nbdkit python plugin (API 2) serving an image file
# whose flush can fail the way Linux's does.
#
#   nbdkit python tests/dropflush.py file=IMAGE [failfile=PATH]
#
# Writes, zeros and trims stay in memory as unflushed 4 KiB pages
# (reads see them, from every connection: one page cache for all).  A
# flush writes them into IMAGE and fsyncs it.  While PATH exists, a
# flush fails with EIO and FORGETS the unflushed pages, as Linux drops
# dirty pages whose write-back failed (so a later fsync succeeds with
# nothing left to write): reads then return what IMAGE durably holds.
# A FUA write is emulated by nbdkit as a write and a flush.
#
# Trims read back as zeros.  Stopping nbdkit (even with SIGTERM) loses
# whatever was not flushed, like a power cut of the disk.

import errno
import os
import threading

import nbdkit

API_VERSION = 2

PAGE = 4096

image = None
failfile = None
fd = -1
size = 0
pages = {}  # page number -> bytearray(PAGE), unflushed
lock = threading.Lock()  # protects pages and the image file offsets


def config(key, value):
    global image, failfile
    if key == "file":
        image = os.path.abspath(value)
    elif key == "failfile":
        failfile = os.path.abspath(value)
    else:
        raise RuntimeError("dropflush: unknown parameter %s" % key)


def config_complete():
    global fd, size
    if image is None:
        raise RuntimeError("dropflush: file= is required")
    fd = os.open(image, os.O_RDWR)
    size = os.fstat(fd).st_size


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(readonly):
    return 1


def get_size(h):
    return size


def can_write(h):
    return True


def can_multi_conn(h):
    return True


def can_flush(h):
    return True


def can_trim(h):
    return True


def can_zero(h):
    return True


def can_fua(h):
    return nbdkit.FUA_EMULATE


def check_range(count, offset):
    if offset < 0 or count < 0 or offset + count > size:
        nbdkit.set_error(errno.EINVAL)
        raise ValueError("dropflush: %d+%d is beyond the image" % (offset, count))


def durable_page(p):
    """The image's bytes of page p, padded with zeros (lock held)."""
    b = bytearray(os.pread(fd, PAGE, p * PAGE))
    return b + bytearray(PAGE - len(b))


def page_for_write(p):
    """Page p as an unflushed page, to be modified (lock held)."""
    pg = pages.get(p)
    if pg is None:
        pg = durable_page(p)
        pages[p] = pg
    return pg


def store(offset, count, data):
    """Put count bytes at offset: data, or zeros if data is None."""
    check_range(count, offset)
    with lock:
        pos = 0
        while pos < count:
            p, o = divmod(offset + pos, PAGE)
            n = min(PAGE - o, count - pos)
            pg = page_for_write(p)
            if data is None:
                pg[o:o + n] = bytes(n)
            else:
                pg[o:o + n] = data[pos:pos + n]
            pos += n


def pread(h, buf, offset, flags):
    count = len(buf)
    check_range(count, offset)
    with lock:
        pos = 0
        while pos < count:
            p, o = divmod(offset + pos, PAGE)
            n = min(PAGE - o, count - pos)
            pg = pages.get(p)
            if pg is None:
                pg = durable_page(p)
            buf[pos:pos + n] = pg[o:o + n]
            pos += n


def pwrite(h, buf, offset, flags):
    store(offset, len(buf), buf)


def zero(h, count, offset, flags):
    store(offset, count, None)


def trim(h, count, offset, flags):
    store(offset, count, None)


def flush(h, flags):
    with lock:
        if failfile is not None and os.path.exists(failfile):
            nbdkit.debug("dropflush: flush fails, %d unflushed pages dropped"
                         % len(pages))
            pages.clear()
            nbdkit.set_error(errno.EIO)
            raise OSError(errno.EIO, "dropflush: flush failed (%s exists)"
                          % failfile)
        for p in sorted(pages):
            n = min(PAGE, size - p * PAGE)
            os.pwrite(fd, bytes(pages[p][:n]), p * PAGE)
        os.fsync(fd)
        pages.clear()
