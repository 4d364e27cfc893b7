/* Helpers of the epoch and retirement tests (epoch-helpers.h). */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "epoch-helpers.h"
#include "log_int.h"

/* Give the start the mirrors of mask (bit i: e->logs[i]). */
void
give (struct env *e, unsigned mask)
{
  unsigned n = 0;

  for (unsigned i = 0; i < e->nlogs; i++)
    if (mask & (1u << i))
      {
        e->conf.log_paths[n] = log_names[i];
        e->pre.logs[n++] = e->logs[i].pd;
      }
  e->conf.nlogs = n;
}

/* The generation of the newest valid superblock on crash device cd. */
uint64_t
sb_gen (struct hhc_dev *cd)
{
  struct log_sb sb;
  struct log_sb_read rd;

  assert_int_equal (log_dev_sb (cd, &sb, &rd), 0);
  return sb.generation;
}

uint64_t
sb_epoch (struct hhc_dev *cd)
{
  return sb_gen (cd) >> LOG_EPOCH_SHIFT;
}

/* A start given the mirrors of mask must be refused (what: them, for
 * the message; block 3 reads v2 or v1 if it is not).
 */
void
refused (struct env *e, unsigned mask, const char *what)
{
  give (e, mask);
  if (env_try_open (e) == 0)
    fail_msg ("%s was taken (it reads v%s)", what,
              reads_v (e, 3, 2) ? "2" : "1");
}

uint64_t
ssd_writes (struct env *e)
{
  return __atomic_load_n (&to_pdev (e->ssd.pd)->writes, __ATOMIC_ACQUIRE);
}

/* A start given the mirrors of mask whose SSD fails at its last write
 * (the state page that records the mark, or the retirement): counted
 * on a start of the same devices first, which is then undone.
 */
void
start_dies_at_last_write (struct env *e, unsigned mask)
{
  unsigned char *img[HHC_MAX_LOGS + 1];
  uint64_t w0 = ssd_writes (e), n;

  img[0] = dev_save (e->ssd.cd);
  for (unsigned i = 0; i < e->nlogs; i++)
    img[i + 1] = dev_save (e->logs[i].cd);
  give (e, mask);
  env_open (e);
  n = ssd_writes (e) - w0;
  env_close (e);
  dev_load (e->ssd.cd, img[0]);
  for (unsigned i = 0; i < e->nlogs; i++)
    dev_load (e->logs[i].cd, img[i + 1]);
  for (unsigned i = 0; i <= e->nlogs; i++)
    free (img[i]);
  assert_true (n > 0);
  pdev_fail_after (e->ssd.pd, n - 1);
  assert_int_not_equal (env_try_open (e), 0);
  pdev_heal (e->ssd.pd);
}

void
run_v (struct env *e, uint64_t v)
{
  env_open (e);
  env_write (e, 3, v, false);
  env_flush (e);
  env_close (e);
}
