/* What hhc_open takes besides the configuration: devices opened before
 * it (hhc_preopen's, or a unit test's own) and the tests' knobs.  The
 * public header only names the type; the filter never looks inside.
 */
#ifndef HHC_PREOPEN_H
#define HHC_PREOPEN_H

#include <stdbool.h>
#include <stdint.h>

#include "dev.h"
#include "hhccore.h"

struct hhc_preopened {
  /* Used instead of opening conf->cache_path (NULL: open it). */
  struct hhc_dev *cache;
  /* Used instead of opening conf->log_paths[i] (NULL: open it). */
  struct hhc_dev *logs[HHC_MAX_LOGS];
  /* hhc_preopen's (allocated, with the devices it opened): hhc_open
   * takes it over, frees the struct, and the devices are closed with
   * the volume (discarded at once if the open fails).  false: a test's
   * own, only read: the struct and the devices stay the test's.
   */
  bool owned;
  /* Tests: at most this many log segments in memory (0: log.c's
   * default, which a small log never reaches).
   */
  uint32_t log_ring_slots;
};

#endif /* HHC_PREOPEN_H */
