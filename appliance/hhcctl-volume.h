/* hhcctl volume (hhcctl-volume.c): the volumes of hhc-gateway's
 * volumes_dir, added and removed at run time; the running gateway's
 * side in hhcctl-gwrun.c.
 */
#ifndef HHC_APPLIANCE_HHCCTL_VOLUME_H
#define HHC_APPLIANCE_HHCCTL_VOLUME_H

#include <stdbool.h>
#include <stddef.h>

/* hhcctl volume add|remove|list [--config FILE] [--wait SECONDS] ...:
 * exit status 0, 1 (an error, one line) or 2 (usage).
 */
int hhcctl_volume (int argc, char **argv);

/* ---- hhcctl-gwrun.c ---- */

/* name is listed in RUN/exports. */
bool gwrun_listed (const char *run_dir, const char *name);
/* RUN/NAME.ctl answers a status request. */
bool gwrun_answers (const char *run_dir, const char *name);
/* SIGHUP to the PID of RUN/hhc-gateway.pid: 0, or with a message in
 * err -2 (no PID file, or no such process: not running) or -1.
 */
int gwrun_sighup (const char *run_dir, char *err, size_t errlen);
/* Wait at most wait_s seconds until name serves (served) or is gone
 * (!served); 0 when it is so, -1 on time-out.
 */
int gwrun_wait (const char *run_dir, const char *name, bool served,
                unsigned wait_s);
/* Write DIR/NAME.json atomically (a hidden temporary file in dir,
 * fsync, rename, fsync dir; dir made if missing); -1 with err.
 */
int gwrun_write (const char *dir, const char *name, const char *text,
                 size_t len, char *err, size_t errlen);
/* Lock dir against other hhcctl volume commands (flock on DIR/.lock,
 * dir made if missing): the fd to close, or -1 with err.
 */
int gwrun_lock (const char *dir, char *err, size_t errlen);
/* Remove DIR/NAME.json (missing is fine), fsync dir; -1 with err. */
int gwrun_unlink (const char *dir, const char *name, char *err, size_t errlen);

#endif /* HHC_APPLIANCE_HHCCTL_VOLUME_H */
