/* The fixture of the flusher tests (test-flusher, test-flusher-race,
 * test-flusher-coalesce): a volume on an in-memory backend whose
 * cache is a crash device behind a hook device, blocks written and
 * checked by version, and a client write in a thread of its own.
 */
#ifndef HHC_TEST_FLUSHERENV_H
#define HHC_TEST_FLUSHERENV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devcrash.h"
#include "hhccore.h"
#include "membackend.h"
#include "preopen.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define TIMEOUT_MS 30000

struct env {
  struct membackend *mb;
  struct hhc_dev *cdev, *hdev;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
};

/* A backend of backend_size bytes (preferred: its preferred block
 * size, 0 for none) and a cache of nslots slots; not opened: the
 * caller may change conf first.
 */
void env_init (struct env *e, uint32_t nslots, uint64_t backend_size,
               uint32_t preferred);
void env_open (struct env *e);
/* Closes the volume if open, then frees the devices and backend. */
void env_free (struct env *e);

/* Write version of block lba through the volume. */
void write_v (struct env *e, uint64_t lba, uint64_t version);
/* Do the backend's bytes (its durable ones if durable, else its
 * current ones) hold version of block lba?
 */
bool backend_has (struct env *e, bool durable, uint64_t lba, uint64_t version);
/* Does block lba read version through the volume? */
bool reads_v (struct env *e, uint64_t lba, uint64_t version);
/* The volume's dirty blocks. */
uint64_t dirty (struct env *e);

/* A client write of version of block lba in a thread of its own
 * (write_thread): started and done are set under lock, with cond
 * broadcast.
 */
struct write_arg {
  struct env *e;
  uint64_t lba, version;
  int result;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool started, done;
};

void write_arg_init (struct write_arg *w, struct env *e, uint64_t lba,
                     uint64_t version);
void *write_thread (void *arg);
bool write_done (struct write_arg *w);

#endif /* HHC_TEST_FLUSHERENV_H */
