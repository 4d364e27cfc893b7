/* iscsi-backend: what the LUN tells about itself (see probe.c). */
#ifndef HHCISCSI_PROBE_H
#define HHCISCSI_PROBE_H

#include "pool.h"

/* Fill io.h's lun from READ CAPACITY(16) and the VPD pages (block
 * limits, provisioning, identification, serial number), through the
 * started pool; the identity falls back to C's target and LUN.
 * Returns -1 after nbdkit_error.
 */
extern int probe_lun (const struct pool_conf *c);

#endif /* HHCISCSI_PROBE_H */
