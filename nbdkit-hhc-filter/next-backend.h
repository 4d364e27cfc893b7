/* Adapter: nbdkit_next as the core's backend interface. */
#ifndef HHC_NEXT_BACKEND_H
#define HHC_NEXT_BACKEND_H

#include <stdbool.h>

#include <nbdkit-filter.h>

#include "hhccore.h"

/* Serialise every call to the plugin (set before any I/O when the
 * plugin's thread model is not parallel).
 */
extern bool next_backend_serialize;

/* Take / drop the serialising lock (no-ops unless serialising). */
void next_backend_lock (void);
void next_backend_unlock (void);

/* Ops whose ctx is an nbdkit_next *. */
extern const struct hhc_backend_ops next_backend_ops;

/* Probe a freshly opened background context (prepare, size, can_*):
 * nbdkit asserts these were called before any I/O.  Fills info; the
 * identity string points into nbdkit-owned memory valid while next is.
 */
int next_backend_probe (nbdkit_next *next, struct hhc_backend_info *info);

#endif /* HHC_NEXT_BACKEND_H */
