/* The fixture of the flusher tests (flusherenv.h). */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "flusherenv.h"

void
env_init (struct env *e, uint32_t nslots, uint64_t backend_size,
          uint32_t preferred)
{
  memset (e, 0, sizeof *e);
  e->mb = membackend_new (backend_size);
  assert_non_null (e->mb);
  assert_int_equal (
      crashdev_create (test_cache_dev_size (nslots, BS), &e->cdev), 0);
  e->hdev = hookdev_new (e->cdev);
  e->info = membackend_info (e->mb, preferred, "membackend:flusher");
  hhc_conf_init (&e->conf);
  e->pre.cache = e->hdev;
  e->conf.msgfn = test_msg;
}

void
env_open (struct env *e)
{
  assert_int_equal (
      hhc_open (&e->conf, &e->pre, &membackend_ops, &e->info, &e->vol), 0);
}

void
env_free (struct env *e)
{
  if (e->vol)
    hhc_close (e->vol);
  hookdev_destroy (e->hdev);
  crashdev_destroy (e->cdev);
  membackend_free (e->mb);
}

void
write_v (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  assert_int_equal (hhc_write (e->vol, e->mb, blk, BS, lba * BS, false), 0);
}

bool
backend_has (struct env *e, bool durable, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, version);
  return membackend_cmp (e->mb, durable, blk, BS, lba * BS) == 0;
}

bool
reads_v (struct env *e, uint64_t lba, uint64_t version)
{
  unsigned char blk[BS], want[BS];

  pattern_fill (want, lba, 0, SECTORS, version);
  assert_int_equal (hhc_read (e->vol, e->mb, blk, BS, lba * BS), 0);
  return memcmp (blk, want, BS) == 0;
}

uint64_t
dirty (struct env *e)
{
  struct hhc_counts c;
  hhc_get_counts (e->vol, &c);
  return c.dirty;
}

void
write_arg_init (struct write_arg *w, struct env *e, uint64_t lba,
                uint64_t version)
{
  memset (w, 0, sizeof *w);
  w->e = e;
  w->lba = lba;
  w->version = version;
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->cond, NULL);
}

void *
write_thread (void *arg)
{
  struct write_arg *w = arg;
  unsigned char blk[BS];
  int r;

  pattern_fill (blk, w->lba, 0, SECTORS, w->version);
  pthread_mutex_lock (&w->lock);
  w->started = true;
  pthread_cond_broadcast (&w->cond);
  pthread_mutex_unlock (&w->lock);
  r = hhc_write (w->e->vol, w->e->mb, blk, BS, w->lba * BS, false);
  pthread_mutex_lock (&w->lock);
  w->result = r;
  w->done = true;
  pthread_cond_broadcast (&w->cond);
  pthread_mutex_unlock (&w->lock);
  return NULL;
}

bool
write_done (struct write_arg *w)
{
  bool d;
  pthread_mutex_lock (&w->lock);
  d = w->done;
  pthread_mutex_unlock (&w->lock);
  return d;
}
