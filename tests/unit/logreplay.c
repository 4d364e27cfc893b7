/* The fixture of the replay tests (logreplay.h). */
#include <config.h>

#include <errno.h>

#include "logreplay.h"

/* Follow the segment chain of a log that never wrapped. */
size_t
parse_segments (struct hhc_dev *d, struct seg_desc *out, size_t max)
{
  unsigned char h[LOG_ALIGN];
  struct log_seg_hdr sh;
  uint64_t pos = 0, seq = 0;
  size_t n = 0;

  while (n < max && LOG_REGION_OFF + pos + sizeof h <= d->size)
    {
      assert_int_equal (dev_pread (d, h, sizeof h, LOG_REGION_OFF + pos), 0);
      if (log_seg_decode (h, &sh) == ENOENT || (n && sh.seq != seq + 1))
        break;
      struct seg_desc s = { LOG_REGION_OFF + pos, sh.seq,     sh.flags,
                            sh.nblocks,           sh.hdr_len, 0 };
      s.len = s.hdr_len + log_seg_data_len (s.nblocks, BS);
      out[n++] = s;
      seq = s.seq;
      pos += s.len;
    }
  return n;
}

/* An environment that writes nothing back: only the replay reaches
 * the backend.
 */
void
quiet_env (struct env *e, uint64_t nblocks, uint32_t nslots, uint64_t log)
{
  env_init (e, nblocks, nslots, 1, LOG_REGION_OFF + log);
  e->conf.dirty_low = 90;
  e->conf.dirty_high = 95;
  e->conf.idle_ms = 0;
  env_open (e);
  membackend_fail_all (e->mb, MB_OP_WRITE, true);
}

void
lose_ssd (struct env *e)
{
  env_close (e);
  membackend_fail_all (e->mb, MB_OP_WRITE, false);
  membackend_clear_write_log (e->mb);
  env_new_ssd (e);
}

void
write_v (struct env *e, uint64_t *expect, uint64_t lba, uint64_t v)
{
  env_write (e, lba, v, false);
  expect[lba] = v;
}
