/* iscsi-backend: the LUN's geometry, and I/O on it (see io.c): byte
 * ranges of any alignment, WRITE SAME, UNMAP and SYNCHRONIZE CACHE,
 * each command run through pool_exec (pool.h).  Callers hold no lock.
 * Every function returns 0, or -1 with errno set after nbdkit_error.
 */
#ifndef HHCISCSI_IO_H
#define HHCISCSI_IO_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes per READ/WRITE command at most (less if the LUN says so), and
 * per write of zeroes.
 */
#define MAX_CHUNK (4u << 20)

/* What the LUN told us in .after_fork (probe.c); read-only after. */
struct lun_info {
  uint32_t bs;        /* logical block size */
  uint64_t blocks;    /* number of blocks */
  uint32_t max_xfer;  /* bytes per READ/WRITE command */
  uint32_t opt_gran;  /* optimal transfer granularity, bytes */
  uint32_t max_unmap; /* blocks per UNMAP, 0 = no limit */
  uint64_t max_ws;    /* blocks per WRITE SAME, 0 = no limit */
  bool lbpu, lbpws, lbprz;
  char *identity; /* export description */
};

extern struct lun_info lun;

/* .load: initialise the read-modify-write locks. */
extern void io_init (void);

/* Read COUNT bytes at OFFSET into BUF, any alignment. */
extern int io_pread (void *buf, uint32_t count, uint64_t offset);

/* Write COUNT bytes of BUF (NULL: zeroes) at OFFSET, any alignment;
 * partial blocks by read-modify-write.
 */
extern int io_pwrite (const void *buf, uint64_t count, uint64_t offset,
                      bool fua);

/* SYNCHRONIZE CACHE(16) of BLOCKS blocks at LBA (0, 0: the whole LU,
 * which covers every write so far; see lu.c).
 */
extern int io_sync (uint64_t lba, uint64_t blocks);

/* Zero whole blocks [LBA, LBA+BLOCKS) with WRITE SAME(16), with the
 * UNMAP bit if MAY_UNMAP.
 */
extern int io_write_same_zero (uint64_t lba, uint64_t blocks, bool may_unmap);

/* UNMAP the whole blocks [LBA, END). */
extern int io_unmap (uint64_t lba, uint64_t end);

#endif /* HHCISCSI_IO_H */
