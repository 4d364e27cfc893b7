/* hhcctl: the gateway's admin tool (hhcctl(8)), one file per command:
 *
 *   hhcctl.c            the command table and dispatch
 *   hhcctl-cli.c        messages (check's report), usage errors, --log
 *   hhcctl-check.c      hhcctl check: the cache, and the summary
 *   hhcctl-check-log.c  hhcctl check: the log (and opening it, for
 *                       format too)
 *   hhcctl-format.c     hhcctl format
 *   hhcctl-recover.c    hhcctl recover
 *   hhcctl-mttdl.c      hhcctl mttdl (the model is mttdl.c)
 *   hhcctl-live.c       hhcctl status and drain (a running gateway)
 *   hhcctl-volume.c     hhcctl volume add, remove, list (volumes_dir;
 *                       hhcctl-gwrun.c talks to the gateway)
 *
 * check, format and recover work on devices no gateway has open (a
 * running gateway holds an exclusive flock on each; check reads
 * anyway, with a warning, format refuses).  They reach the core only
 * through gateway/offline.h.  check opens everything read-only
 * (offline_open_readonly: writes fail with EROFS), so nothing it calls
 * in the core can change a byte.
 *
 * Exit status of every command: 0 success (check: healthy), 1 an
 * error (check: a problem found), 2 a usage error.
 */
#ifndef HHC_HHCCTL_H
#define HHC_HHCCTL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "offline.h"

/* ---- hhcctl-cli.c ---- */

extern bool quiet;           /* recover --quiet */
extern bool quiet_core;      /* drop the core's info messages */
extern const char *cmd_name; /* "hhcctl CMD", for messages */

/* check's report: the core's errors and warnings count as its own. */
struct report {
  unsigned problems, warnings;
};
extern struct report *report; /* NULL: not in check */

/* A line of check's report on stdout: plain, "error: " (a problem) or
 * "warning: ".
 */
void note (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
void problem (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
void warning (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* The core's messages: into check's report, else to stderr. */
void msg_cb (enum hhc_msg_level level, const char *msg);

/* A usage error: one line, exit status 2. */
int usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* getopt_long (with ":" first in optstring and opterr 0) returned c,
 * '?' or ':': name the option.
 */
int bad_option (int c, char **argv);
/* Collect a --log PATH (at most HHC_MAX_LOGS). */
int add_log (const char **logs, unsigned *nlogs, const char *path);

/* ---- hhcctl-check-log.c (shared with hhcctl-format.c) ---- */

/* Open the log on the open devices of ls (offline_logset_open); a
 * mirror that cannot be read is a problem.
 */
int logset_open (struct offline_logset *ls);
/* Blocks a replay of the log would write to the backend. */
int replay_count (struct hhc_log *log, uint64_t *n);
/* check: the log and its pairing with the cache (cc NULL: no cache). */
void report_log (struct offline_logset *ls, const struct offline_cache *cc,
                 const char *cache_path);

/* ---- the commands: hhcctl NAME ARGS (argv[0] is NAME) ---- */

int cmd_check (int argc, char **argv);  /* hhcctl-check.c */
int cmd_format (int argc, char **argv); /* hhcctl-format.c */
/* Whether a stopped volume's cache and logs hold nothing that is not
 * in the backend, as format decides it (locked: not while a gateway
 * has them open): 0 yes, 1 no (one line said why).
 */
int hhcctl_written_back (const char *cache, char *const *logs, unsigned nlogs,
                         char *why, size_t len);
int cmd_recover (int argc, char **argv); /* hhcctl-recover.c */
int cmd_mttdl (int argc, char **argv);   /* hhcctl-mttdl.c */

#endif /* HHC_HHCCTL_H */
