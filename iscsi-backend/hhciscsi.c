/* nbdkit-hhciscsi-plugin: one iSCSI LUN, reached with libiscsi.
 *
 * Files: hhciscsi.c (parameters, geometry, the nbdkit callbacks),
 * pool.c (choosing a session, reconnect and retry), session.c (one
 * session: login, issuing, reading the replies), lu.c (what a reset of
 * the LU may have lost), sense.c (status and sense data -> action and
 * errno).
 *
 * Geometry and capabilities are read once, in .after_fork, after the
 * pool has logged in (nbdkit forks before that; a failure there stops
 * the server with one error line).  After that `lun` is read-only.
 *
 * Requests are split into whole blocks, sent with READ(16)/WRITE(16)
 * in chunks of at most `lun.max_xfer` bytes, and partial edge blocks
 * of a write go through read-modify-write.  Two RMWs of one block
 * must not interleave, so each holds rmw_locks[block % RMW_LOCKS]
 * (one at a time, so no lock order is needed).  Concurrent writes of
 * overlapping whole blocks are not ordered: NBD leaves that undefined.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "cleanup.h"
#include "lock.h"
#include "parse.h"
#include "pool.h"

#define DEFAULT_INITIATOR "iqn.2026-01.org.hhc-gateway:initiator"
#define DEFAULT_PORT "3260"
#define MAX_CHUNK (4u << 20)
#define RMW_LOCKS 64

static struct pool_conf conf = {
  .lun = -1,
  .sessions = 4,
  .attempts = 6,
};

/* What the LUN told us in .after_fork. */
static struct {
  uint32_t bs;        /* logical block size */
  uint64_t blocks;    /* number of blocks */
  uint32_t max_xfer;  /* bytes per READ/WRITE command */
  uint32_t opt_gran;  /* optimal transfer granularity, bytes */
  uint32_t max_unmap; /* blocks per UNMAP, 0 = no limit */
  uint64_t max_ws;    /* blocks per WRITE SAME, 0 = no limit */
  bool lbpu, lbpws, lbprz;
  char *identity; /* export description */
} lun;

static pthread_mutex_t rmw_locks[RMW_LOCKS];

static void
hhciscsi_load (void)
{
  unsigned i;
  for (i = 0; i < RMW_LOCKS; i++)
    pthread_mutex_init (&rmw_locks[i], NULL);
}

static void
hhciscsi_unload (void)
{
  if (conf.password)
    memset (conf.password, 0, strlen (conf.password));
  free (conf.portal);
  free (conf.target);
  free (conf.initiator);
  free (conf.user);
  free (conf.password);
  free (lun.identity);
}

/* ---------------------------------------------------------------- */
/* Parameters. */

static int
set_string (char **dst, const char *key, const char *value, size_t len)
{
  free (*dst);
  *dst = strndup (value, len);
  if (*dst == NULL)
    {
      nbdkit_error ("%s: strndup: %m", key);
      return -1;
    }
  return 0;
}

/* KEY=VALUE as a whole number from LO to HI (common/parse.h) into
 * *OUT, or one error line saying what it MUST be.
 */
static int
parse_number (const char *key, const char *value, unsigned lo, unsigned hi,
              const char *must, unsigned *out)
{
  unsigned v;

  if (hhc_parse_unsigned (value, NULL, &v) != NULL || v < lo || v > hi)
    {
      nbdkit_error ("%s: must be %s", key, must);
      return -1;
    }
  *out = v;
  return 0;
}

static int
parse_lun (const char *s)
{
  unsigned v;

  if (parse_number ("lun", s, 0, 16383, "a number from 0 to 16383", &v) == -1)
    return -1;
  conf.lun = v;
  return 0;
}

/* Split iscsi://[user[%password]@]host[:port]/target-iqn/lun.  The
 * URL may hold a secret, so no message repeats it.
 */
static int
parse_url (const char *url)
{
  const char *p, *at, *slash, *slash2, *pct;

  if (strncmp (url, "iscsi://", 8) != 0)
    {
      nbdkit_error ("url: must start with iscsi://");
      return -1;
    }
  p = url + 8;
  slash = strchr (p, '/');
  if (slash == NULL || (slash2 = strrchr (slash + 1, '/')) == NULL
      || slash2 == slash + 1 || slash2[1] == '\0')
    {
      nbdkit_error ("url: expected iscsi://[user[%%password]@]host[:port]"
                    "/target-iqn/lun");
      return -1;
    }
  at = memchr (p, '@', slash - p);
  if (at)
    {
      pct = memchr (p, '%', at - p);
      if (set_string (&conf.user, "url", p, (pct ? pct : at) - p) == -1)
        return -1;
      if (pct
          && set_string (&conf.password, "url", pct + 1, at - pct - 1) == -1)
        return -1;
      p = at + 1;
    }
  if (set_string (&conf.portal, "url", p, slash - p) == -1
      || set_string (&conf.target, "url", slash + 1, slash2 - slash - 1) == -1)
    return -1;
  return parse_lun (slash2 + 1);
}

static int
hhciscsi_config (const char *key, const char *value)
{
  if (strcmp (key, "url") == 0)
    return parse_url (value);
  else if (strcmp (key, "portal") == 0)
    return set_string (&conf.portal, key, value, strlen (value));
  else if (strcmp (key, "target") == 0)
    return set_string (&conf.target, key, value, strlen (value));
  else if (strcmp (key, "lun") == 0)
    return parse_lun (value);
  else if (strcmp (key, "initiator") == 0)
    return set_string (&conf.initiator, key, value, strlen (value));
  else if (strcmp (key, "user") == 0)
    return set_string (&conf.user, key, value, strlen (value));
  else if (strcmp (key, "password") == 0)
    {
      free (conf.password);
      conf.password = NULL;
      return nbdkit_read_password (value, &conf.password);
    }
  else if (strcmp (key, "sessions") == 0)
    return parse_number (key, value, 1, 64, "between 1 and 64", &conf.sessions);
  else if (strcmp (key, "timeout") == 0)
    {
      unsigned v;
      if (parse_number (key, value, 0, INT_MAX,
                        "0 (none) or a number of seconds", &v)
          == -1)
        return -1;
      conf.timeout = v;
      return 0;
    }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

/* Append the default port to a portal given without one. */
static int
portal_add_port (void)
{
  const char *end = conf.portal;
  char *s;

  if (conf.portal[0] == '[')
    {
      end = strchr (conf.portal, ']');
      if (end == NULL)
        {
          nbdkit_error ("portal: unterminated [IPv6 address]");
          return -1;
        }
    }
  if (strchr (end, ':'))
    return 0;
  if (asprintf (&s, "%s:%s", conf.portal, DEFAULT_PORT) == -1)
    {
      nbdkit_error ("asprintf: %m");
      return -1;
    }
  free (conf.portal);
  conf.portal = s;
  return 0;
}

static int
hhciscsi_config_complete (void)
{
  if (conf.portal == NULL || conf.target == NULL || conf.lun < 0)
    {
      nbdkit_error ("give url=iscsi://HOST[:PORT]/TARGET-IQN/LUN, or portal=,"
                    " target= and lun=");
      return -1;
    }
  if (conf.password && conf.user == NULL)
    {
      nbdkit_error ("password= needs user= (CHAP)");
      return -1;
    }
  if (conf.initiator == NULL
      && set_string (&conf.initiator, "initiator", DEFAULT_INITIATOR,
                     strlen (DEFAULT_INITIATOR))
             == -1)
    return -1;
  return portal_add_port ();
}

#define hhciscsi_config_help                                                   \
  "url=iscsi://[USER[%PASSWORD]@]HOST[:PORT]/TARGET-IQN/LUN\n"                 \
  "                             The LUN (or portal=, target=, lun=).\n"        \
  "portal=HOST[:PORT]           Target portal (port 3260 by default).\n"       \
  "target=IQN                   Target name.\n"                                \
  "lun=N                        Logical unit number.\n"                        \
  "initiator=IQN                Our initiator name\n"                          \
  "                             (default " DEFAULT_INITIATOR ").\n"            \
  "user=NAME                    CHAP user name.\n"                             \
  "password=-|+FILE|-FD|SECRET  CHAP secret.\n"                                \
  "sessions=N                   iSCSI sessions in the pool (default 4).\n"     \
  "timeout=SECS                 Per-command timeout (default: none)."

/* ---------------------------------------------------------------- */
/* Commands, each an issue function for pool_exec. */

struct io_arg {
  uint64_t lba;
  uint32_t blocks;
  unsigned char *data; /* write / write same payload */
  bool fua;
  bool may_unmap; /* WRITE SAME: set the UNMAP bit */
  struct unmap_list unmap;
};

/* The blocks are read straight into a->data (no copy, no allocation). */
static struct scsi_task *
issue_read (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
            void *priv)
{
  struct io_arg *a = p;
  size_t n = (size_t)a->blocks * lun.bs;
  struct scsi_task *t
      = iscsi_read16_task (ctx, l, a->lba, n, lun.bs, 0, 0, 0, 0, 0, cb, priv);
  if (t && scsi_task_add_data_in_buffer (t, n, a->data) != 0)
    {
      iscsi_scsi_cancel_task (ctx, t);
      scsi_free_scsi_task (t);
      return NULL;
    }
  return t;
}

static struct scsi_task *
issue_write (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
             void *priv)
{
  struct io_arg *a = p;
  return iscsi_write16_task (ctx, l, a->lba, a->data, a->blocks * lun.bs,
                             lun.bs, 0, 0, a->fua, 0, 0, cb, priv);
}

static struct scsi_task *
issue_sync_cache (struct iscsi_context *ctx, int l, void *p,
                  iscsi_command_cb cb, void *priv)
{
  struct io_arg *a = p;
  return iscsi_synchronizecache16_task (ctx, l, a->lba, a->blocks, 0, 0, cb,
                                        priv);
}

static struct scsi_task *
issue_write_same (struct iscsi_context *ctx, int l, void *p,
                  iscsi_command_cb cb, void *priv)
{
  struct io_arg *a = p;
  return iscsi_writesame16_task (ctx, l, a->lba, a->data, lun.bs, a->blocks, 0,
                                 a->may_unmap, 0, 0, cb, priv);
}

static struct scsi_task *
issue_unmap (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
             void *priv)
{
  struct io_arg *a = p;
  return iscsi_unmap_task (ctx, l, 0, 0, &a->unmap, 1, cb, priv);
}

static struct scsi_task *
issue_capacity (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
                void *priv)
{
  return iscsi_readcapacity16_task (ctx, l, cb, priv);
}

static struct scsi_task *
issue_vpd (struct iscsi_context *ctx, int l, void *p, iscsi_command_cb cb,
           void *priv)
{
  return iscsi_inquiry_task (ctx, l, 1, *(int *)p, 255, cb, priv);
}

/* Read BLOCKS blocks at LBA into BUF (chunked). */
static int
read_blocks (uint64_t lba, uint64_t blocks, unsigned char *buf)
{
  uint32_t per = lun.max_xfer / lun.bs;
  while (blocks > 0)
    {
      struct io_arg a
          = { .lba = lba, .blocks = blocks < per ? blocks : per, .data = buf };
      struct scsi_task *t;
      size_t n = (size_t)a.blocks * lun.bs;
      if (pool_exec ("READ(16)", POOL_OTHER, issue_read, &a, &t) == -1)
        return -1;
      if (t->residual_status == SCSI_RESIDUAL_UNDERFLOW && t->residual > 0)
        {
          nbdkit_error ("READ(16): short read (%zu of %zu bytes)",
                        n - (t->residual < n ? t->residual : n), n);
          scsi_free_scsi_task (t);
          errno = EIO;
          return -1;
        }
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
      buf += n;
    }
  return 0;
}

/* Write BLOCKS blocks from BUF at LBA (chunked). */
static int
write_blocks (uint64_t lba, uint64_t blocks, const unsigned char *buf, bool fua)
{
  uint32_t per = lun.max_xfer / lun.bs;
  while (blocks > 0)
    {
      struct io_arg a = { .lba = lba,
                          .blocks = blocks < per ? blocks : per,
                          .data = (unsigned char *)buf,
                          .fua = fua };
      struct scsi_task *t;
      if (pool_exec ("WRITE(16)", fua ? POOL_WRITE_FUA : POOL_WRITE,
                     issue_write, &a, &t)
          == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
      buf += (size_t)a.blocks * lun.bs;
    }
  return 0;
}

/* Replace LEN bytes at offset IN of block LBA with BUF. */
static int
rmw_block (uint64_t lba, uint32_t in, uint32_t len, const void *buf, bool fua)
{
  HHC_CLEANUP_FREE unsigned char *blk = malloc (lun.bs);
  if (blk == NULL)
    {
      nbdkit_error ("malloc: %m");
      return -1;
    }
  HHC_SCOPED_LOCK (&rmw_locks[lba % RMW_LOCKS]);
  if (read_blocks (lba, 1, blk) == -1)
    return -1;
  if (buf)
    memcpy (blk + in, buf, len);
  else
    memset (blk + in, 0, len);
  return write_blocks (lba, 1, blk, fua);
}

/* Write COUNT bytes of BUF (NULL: zeroes) at OFFSET, any alignment. */
static int
write_bytes (const unsigned char *buf, uint64_t count, uint64_t offset,
             bool fua)
{
  HHC_CLEANUP_FREE unsigned char *zeroes = NULL;
  while (count > 0)
    {
      uint64_t lba = offset / lun.bs;
      uint32_t in = offset % lun.bs;
      uint64_t n;
      int r;
      if (in != 0 || count < lun.bs)
        {
          n = lun.bs - in < count ? lun.bs - in : count;
          r = rmw_block (lba, in, n, buf, fua);
        }
      else
        {
          n = count - count % lun.bs;
          if (buf == NULL)
            {
              if (n > MAX_CHUNK)
                n = MAX_CHUNK;
              if (zeroes == NULL && (zeroes = calloc (1, MAX_CHUNK)) == NULL)
                {
                  nbdkit_error ("calloc: %m");
                  return -1;
                }
            }
          r = write_blocks (lba, n / lun.bs, buf ? buf : zeroes, fua);
        }
      if (r == -1)
        return -1;
      count -= n;
      offset += n;
      if (buf)
        buf += n;
    }
  return 0;
}

/* SYNCHRONIZE CACHE(16) of BLOCKS blocks at LBA (0, 0: the whole LU,
 * which covers every write so far; see lu.c).
 */
static int
sync_cache (uint64_t lba, uint64_t blocks)
{
  struct io_arg a = { .lba = lba, .blocks = blocks > UINT32_MAX ? 0 : blocks };
  enum pool_kind k = lba == 0 && a.blocks == 0 ? POOL_SYNC : POOL_OTHER;
  struct scsi_task *t;
  if (pool_exec ("SYNCHRONIZE CACHE(16)", k, issue_sync_cache, &a, &t) == -1)
    return -1;
  scsi_free_scsi_task (t);
  return 0;
}

/* ---------------------------------------------------------------- */
/* Geometry and identity, once, after logging in. */

/* Run INQUIRY for VPD page PAGE; NULL (logged at debug level) if the
 * LUN does not have it.
 */
static struct scsi_task *
vpd (int page)
{
  struct scsi_task *t;
  if (pool_exec ("INQUIRY", POOL_OTHER, issue_vpd, &page, &t) == -1)
    return NULL;
  if (scsi_datain_unmarshall (t) == NULL)
    {
      nbdkit_debug ("VPD page 0x%02x: cannot decode it", page);
      scsi_free_scsi_task (t);
      return NULL;
    }
  return t;
}

static int
probe_capacity (void)
{
  struct scsi_task *t;
  struct scsi_readcapacity16 *rc;

  if (pool_exec ("READ CAPACITY(16)", POOL_OTHER, issue_capacity, NULL, &t)
      == -1)
    return -1;
  rc = scsi_datain_unmarshall (t);
  if (rc == NULL)
    {
      nbdkit_error ("READ CAPACITY(16): cannot decode the reply");
      scsi_free_scsi_task (t);
      return -1;
    }
  lun.bs = rc->block_length;
  lun.blocks = rc->returned_lba + 1;
  lun.lbprz = rc->lbprz;
  scsi_free_scsi_task (t);
  if (lun.bs < 512 || lun.bs > 65536 || (lun.bs & (lun.bs - 1)) != 0)
    {
      nbdkit_error ("the LUN's block size %" PRIu32 " is not supported",
                    lun.bs);
      return -1;
    }
  return 0;
}

static void
probe_limits (void)
{
  struct scsi_task *t;

  lun.max_xfer = MAX_CHUNK;
  lun.opt_gran = lun.bs;
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS)) != NULL)
    {
      struct scsi_inquiry_block_limits *bl = scsi_datain_unmarshall (t);
      uint64_t max = (uint64_t)bl->max_xfer_len * lun.bs;
      uint64_t gran = (uint64_t)bl->opt_gran * lun.bs;
      if (max >= lun.bs && max < lun.max_xfer)
        lun.max_xfer = max - max % lun.bs;
      if (gran > lun.bs && gran <= (32u << 20) && (gran & (gran - 1)) == 0)
        lun.opt_gran = gran;
      lun.max_unmap = bl->max_unmap == 0xffffffff ? 0 : bl->max_unmap;
      lun.max_ws = bl->max_ws_len;
      scsi_free_scsi_task (t);
    }
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING)) != NULL)
    {
      struct scsi_inquiry_logical_block_provisioning *lbp
          = scsi_datain_unmarshall (t);
      lun.lbpu = lbp->lbpu;
      lun.lbpws = lbp->lbpws;
      scsi_free_scsi_task (t);
    }
}

/* "naa.HEX" or "eui.HEX" from VPD 0x83, plus " serial=..." from 0x80. */
static int
probe_identity (void)
{
  char id[160] = "";
  struct scsi_task *t;

  if ((t = vpd (SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION)) != NULL)
    {
      struct scsi_inquiry_device_identification *di
          = scsi_datain_unmarshall (t);
      struct scsi_inquiry_device_designator *d;
      for (d = di->designators; d && id[0] == '\0'; d = d->next)
        {
          size_t i, o;
          if (d->designator_type != SCSI_DESIGNATOR_TYPE_NAA
              && d->designator_type != SCSI_DESIGNATOR_TYPE_EUI_64)
            continue;
          o = snprintf (id, sizeof id, "%s.",
                        d->designator_type == SCSI_DESIGNATOR_TYPE_NAA ? "naa"
                                                                       : "eui");
          for (i = 0; i < (size_t)d->designator_length && o + 3 < 64; i++)
            o += snprintf (id + o, sizeof id - o, "%02x",
                           (unsigned char)d->designator[i]);
        }
      scsi_free_scsi_task (t);
    }
  if ((t = vpd (SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER)) != NULL)
    {
      struct scsi_inquiry_unit_serial_number *sn = scsi_datain_unmarshall (t);
      size_t o = strlen (id);
      const char *u = sn->usn ? sn->usn : "";
      while (*u == ' ') /* SPC pads the serial with leading spaces */
        u++;
      if (*u)
        snprintf (id + o, sizeof id - o, "%sserial=%.64s", o ? " " : "", u);
      scsi_free_scsi_task (t);
    }
  if (id[0] == '\0')
    snprintf (id, sizeof id, "%.100s/%d", conf.target, conf.lun);
  lun.identity = strdup (id);
  if (lun.identity == NULL)
    {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  return 0;
}

static int
hhciscsi_after_fork (void)
{
  if (pool_start (&conf) == -1 || probe_capacity () == -1)
    return -1;
  probe_limits ();
  if (probe_identity () == -1)
    return -1;
  nbdkit_debug ("hhciscsi: %s: %" PRIu64 " blocks of %" PRIu32
                " bytes, unmap=%d write-same=%d, identity %s",
                conf.target, lun.blocks, lun.bs, lun.lbpu, lun.lbpws,
                lun.identity);
  return 0;
}

static void
hhciscsi_cleanup (void)
{
  pool_stop ();
}

/* ---------------------------------------------------------------- */
/* nbdkit callbacks. */

static void *
hhciscsi_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
hhciscsi_get_size (void *h)
{
  return (int64_t)(lun.blocks * lun.bs);
}

static const char *
hhciscsi_export_description (void *h)
{
  return lun.identity;
}

static int
hhciscsi_block_size (void *h, uint32_t *minimum, uint32_t *preferred,
                     uint32_t *maximum)
{
  *minimum = lun.bs;
  *preferred = lun.opt_gran;
  *maximum = 0xffffffff;
  return 0;
}

static int
hhciscsi_can_multi_conn (void *h)
{
  return 1; /* SYNCHRONIZE CACHE covers every session's writes */
}

static int
hhciscsi_can_flush (void *h)
{
  return 1;
}

static int
hhciscsi_can_fua (void *h)
{
  return NBDKIT_FUA_NATIVE;
}

static int
hhciscsi_can_trim (void *h)
{
  return lun.lbpu;
}

static int
hhciscsi_can_zero (void *h)
{
  return lun.lbpws; /* else nbdkit writes zeroes with .pwrite */
}

static int
hhciscsi_can_fast_zero (void *h)
{
  return lun.lbpws;
}

static int
hhciscsi_pread (void *h, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  uint64_t first = offset / lun.bs;
  uint64_t end = (offset + count + lun.bs - 1) / lun.bs;
  HHC_CLEANUP_FREE unsigned char *bounce = NULL;

  if (offset % lun.bs == 0 && count % lun.bs == 0)
    return read_blocks (first, count / lun.bs, buf);
  bounce = malloc ((end - first) * lun.bs);
  if (bounce == NULL)
    {
      nbdkit_error ("malloc: %m");
      return -1;
    }
  if (read_blocks (first, end - first, bounce) == -1)
    return -1;
  memcpy (buf, bounce + offset % lun.bs, count);
  return 0;
}

static int
hhciscsi_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  return write_bytes (buf, count, offset, flags & NBDKIT_FLAG_FUA);
}

/* After a reset that may have dropped writes from the target's cache
 * (pool_writes_lost) no flush can succeed: the plugin does not keep
 * what it wrote, so it cannot write it again.  The SYNCHRONIZE CACHE
 * is still sent, for what the LU does hold.
 */
static int
hhciscsi_flush (void *h, uint32_t flags)
{
  if (sync_cache (0, 0) == -1)
    return -1;
  if (pool_writes_lost ())
    {
      nbdkit_debug ("flush: fails: a reset may have lost writes (see the"
                    " error above)");
      errno = EIO;
      return -1;
    }
  return 0;
}

/* Zero whole blocks [LBA, LBA+BLOCKS) with WRITE SAME(16). */
static int
write_same_zero (uint64_t lba, uint64_t blocks, bool may_unmap)
{
  HHC_CLEANUP_FREE unsigned char *zero = calloc (1, lun.bs);
  uint64_t per = lun.max_ws ? lun.max_ws : 65536;
  if (zero == NULL)
    {
      nbdkit_error ("calloc: %m");
      return -1;
    }
  while (blocks > 0)
    {
      struct io_arg a = { .lba = lba,
                          .blocks = blocks < per ? blocks : per,
                          .data = zero,
                          .may_unmap = may_unmap };
      struct scsi_task *t;
      if (pool_exec ("WRITE SAME(16)", POOL_WRITE, issue_write_same, &a, &t)
          == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.blocks;
      blocks -= a.blocks;
    }
  return 0;
}

static int
hhciscsi_zero (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t first = (offset + lun.bs - 1) / lun.bs;
  uint64_t end = (offset + count) / lun.bs;
  bool fua = flags & NBDKIT_FLAG_FUA;
  bool may_unmap = (flags & NBDKIT_FLAG_MAY_TRIM) && lun.lbpu && lun.lbprz;

  if (end <= first)
    return write_bytes (NULL, count, offset, fua);
  if (write_bytes (NULL, first * lun.bs - offset, offset, fua) == -1
      || write_bytes (NULL, offset + count - end * lun.bs, end * lun.bs, fua)
             == -1
      || write_same_zero (first, end - first, may_unmap) == -1)
    return -1;
  return fua ? sync_cache (first, end - first) : 0;
}

static int
hhciscsi_trim (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint64_t lba = (offset + lun.bs - 1) / lun.bs;
  uint64_t end = (offset + count) / lun.bs;
  uint64_t per = lun.max_unmap ? lun.max_unmap : UINT32_MAX;
  uint64_t first = lba;

  while (lba < end)
    {
      struct io_arg a = { .unmap = { .lba = lba } };
      struct scsi_task *t;
      a.unmap.num = end - lba < per ? end - lba : per;
      if (pool_exec ("UNMAP", POOL_WRITE, issue_unmap, &a, &t) == -1)
        return -1;
      scsi_free_scsi_task (t);
      lba += a.unmap.num;
    }
  if ((flags & NBDKIT_FLAG_FUA) && end > first)
    return sync_cache (first, end - first);
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "hhciscsi",
  .longname = "hhc-gateway iSCSI LUN plugin (libiscsi)",
  .version = PACKAGE_VERSION,
  .load = hhciscsi_load,
  .unload = hhciscsi_unload,
  .config = hhciscsi_config,
  .config_complete = hhciscsi_config_complete,
  .config_help = hhciscsi_config_help,
  .magic_config_key = "url",
  .after_fork = hhciscsi_after_fork,
  .cleanup = hhciscsi_cleanup,
  .open = hhciscsi_open,
  .get_size = hhciscsi_get_size,
  .export_description = hhciscsi_export_description,
  .block_size = hhciscsi_block_size,
  .can_multi_conn = hhciscsi_can_multi_conn,
  .can_flush = hhciscsi_can_flush,
  .can_fua = hhciscsi_can_fua,
  .can_trim = hhciscsi_can_trim,
  .can_zero = hhciscsi_can_zero,
  .can_fast_zero = hhciscsi_can_fast_zero,
  .pread = hhciscsi_pread,
  .pwrite = hhciscsi_pwrite,
  .flush = hhciscsi_flush,
  .zero = hhciscsi_zero,
  .trim = hhciscsi_trim,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
