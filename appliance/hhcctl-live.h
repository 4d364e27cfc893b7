/* hhcctl's commands for a running gateway (hhcctl-live.c). */
#ifndef HHC_APPLIANCE_HHCCTL_LIVE_H
#define HHC_APPLIANCE_HHCCTL_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#define HHC_MIN_U64(a, b) ((uint64_t)(a) < (uint64_t)(b) ? (a) : (b))

/* hhcctl status [--run-dir DIR] [--json]: a table of the volumes; exit
 * status 0, or 1 when a volume does not answer.
 */
int hhcctl_status (int argc, char **argv);

/* hhcctl drain [--run-dir DIR] [--quiet] VOLUME: write back every
 * dirty block, with a progress bar; 0 when clean.
 */
int hhcctl_drain (int argc, char **argv);

#endif /* HHC_APPLIANCE_HHCCTL_LIVE_H */
