/* A volume on an in-memory backend and a crash-device cache, for the
 * core's unit tests (hhc_open with no log).
 */
#ifndef HHC_TEST_VOLENV_H
#define HHC_TEST_VOLENV_H

#include "devcrash.h"
#include "hhccore.h"
#include "membackend.h"
#include "preopen.h"

struct volenv {
  struct membackend *mb;
  struct hhc_dev *cdev;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
};

/* A backend of backend_size bytes and a cache of exactly nslots slots
 * of 4 KiB; conf in mode, messages to test_msg.  Not opened yet: the
 * caller may change conf first.
 */
void volenv_init (struct volenv *e, enum hhc_mode mode, uint32_t nslots,
                  uint64_t backend_size);
/* hhc_open: returns its result, e->vol set on success. */
int volenv_try_open (struct volenv *e);
void volenv_close (struct volenv *e);
void volenv_free (struct volenv *e);
struct hhc_counts volenv_counts (struct volenv *e);

#endif /* HHC_TEST_VOLENV_H */
