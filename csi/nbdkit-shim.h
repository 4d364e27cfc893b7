/* hhc-csi: nbdkit_error and nbdkit_debug for cos-backend's S3 client
 * (libhhcs3), which calls them as the plugin does.  hhc-csi keeps the
 * last error text of each thread, so that the backend that called the
 * client can put it in its struct csi_err.
 */
#ifndef HHC_CSI_NBDKIT_SHIM_H
#define HHC_CSI_NBDKIT_SHIM_H

#include <stdbool.h>

/* The text of this thread's last nbdkit_error ("" when none). */
const char *csi_shim_last_error (void);
/* Forget it (before a call whose error is wanted). */
void csi_shim_clear_error (void);
/* nbdkit_debug writes to standard error when set (default off). */
extern bool csi_shim_debug;

#endif /* HHC_CSI_NBDKIT_SHIM_H */
