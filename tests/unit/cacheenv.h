/* The fixture of the cache tests (test-cache, test-cache-reuse,
 * test-cache-crash, test-cache-format): a volume on an in-memory
 * backend whose cache is a crash device behind a hook device, and
 * helpers for versioned blocks, slot states and raw metadata.
 */
#ifndef HHC_TEST_CACHEENV_H
#define HHC_TEST_CACHEENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devcrash.h"
#include "hhccore.h"
#include "index.h"
#include "membackend.h"
#include "preopen.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)

struct env {
  struct membackend *mb;
  struct hhc_dev *cdev; /* crash device */
  struct hhc_dev *hdev; /* hookdev over cdev (what the volume uses) */
  struct metacheck *mc; /* NULL unless asked for */
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
};

/* A backend of backend_size bytes (every block version 0 of its
 * pattern if pattern) and a cache of nslots slots, in wb; not opened.
 */
void env_init (struct env *e, uint32_t nslots, uint64_t backend_size,
               bool pattern);
int env_open (struct env *e);
void env_open_ok (struct env *e);
/* Close; after a crash the final commit fails and that is expected. */
int env_close (struct env *e);
void env_free (struct env *e);
/* Power cut keeping the unsynced writes keep() chooses, then power on. */
void env_crash_restart (struct env *e, bool (*keep) (size_t, void *));
bool keep_none (size_t i, void *opaque);

/* Write version of block lba through the volume. */
void write_v (struct env *e, uint64_t lba, uint64_t version);
/* Version of block lba as read through the volume; -1 if the sectors
 * disagree or are not a valid pattern of that block, -2 if all zero.
 */
int64_t read_v (struct env *e, uint64_t lba);
/* State of block lba's slot (persisted-state word in RAM). */
enum slot_state block_state (struct hhc_volume *vol, uint64_t lba);

/* The whole device (malloc'd). */
unsigned char *dev_snapshot (struct hhc_dev *d);
/* Nothing pending and every byte as in before. */
void assert_dev_unchanged (struct env *e, const unsigned char *before);
/* Overwrite with garbage and make it durable. */
void corrupt (struct hhc_dev *d, uint64_t off, size_t len, uint64_t seed);
uint64_t get64le (const unsigned char *p);
uint32_t get32le (const unsigned char *p);
/* Offsets of both copies of metadata page p and their sequences. */
void page_copies (struct hhc_dev *d, uint32_t p, uint64_t off[2],
                  uint64_t seq[2]);

#endif /* HHC_TEST_CACHEENV_H */
