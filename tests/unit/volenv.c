/* A volume for the core's unit tests: see volenv.h. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "volenv.h"

void
volenv_init (struct volenv *e, enum hhc_mode mode, uint32_t nslots,
             uint64_t backend_size)
{
  memset (e, 0, sizeof *e);
  e->mb = membackend_new (backend_size);
  if (e->mb == NULL
      || crashdev_create (test_cache_dev_size (nslots, 4096), &e->cdev) != 0)
    abort ();
  e->info = membackend_info (e->mb, 0, "membackend:volume");
  hhc_conf_init (&e->conf);
  e->pre.cache = e->cdev;
  e->conf.msgfn = test_msg;
  e->conf.mode = mode;
}

int
volenv_try_open (struct volenv *e)
{
  return hhc_open (&e->conf, &e->pre, &membackend_ops, &e->info, &e->vol);
}

void
volenv_close (struct volenv *e)
{
  if (e->vol)
    hhc_close (e->vol);
  e->vol = NULL;
}

void
volenv_free (struct volenv *e)
{
  volenv_close (e);
  crashdev_destroy (e->cdev);
  membackend_free (e->mb);
}

struct hhc_counts
volenv_counts (struct volenv *e)
{
  struct hhc_counts c;

  hhc_get_counts (e->vol, &c);
  return c;
}
