/* hhc-gateway's internals, shared by its files:
 *
 *   gateway.c            main, the run directory, the signal loop
 *   gateway-state.c      the shared state below, messages, clock, paths
 *   gateway-supervise.c  the children: start, reap, restart, stop
 *   gateway-spawn.c      nbdkit command lines (secrets through pipes)
 *   gateway-reload.c     SIGHUP: apply a new configuration
 *   gateway-status.c     the status document (HTTP threads)
 *   gateway-notify.c     sd_notify: READY, RELOADING, STOPPING, STATUS,
 *                        WATCHDOG (nothing without NOTIFY_SOCKET)
 *
 * Only the main thread changes anything; `lock` protects vols, nvols
 * and every struct vol's fields, which the HTTP threads read.
 */
#ifndef HHC_APPLIANCE_GATEWAY_INT_H
#define HHC_APPLIANCE_GATEWAY_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gwconfig.h"

enum vstate {
  V_STARTING,   /* spawned, not yet serving */
  V_RUNNING,    /* its socket accepts connections */
  V_RESTARTING, /* died; started again at restart_at */
  V_FAILED,     /* died before it served; started again at restart_at */
  V_STOPPING,   /* SIGTERM sent */
};

const char *vstate_to_string (enum vstate s);

struct vol {
  const struct gw_volume *v; /* in cfg */
  pid_t pid;                 /* 0 when not running */
  enum vstate state;
  unsigned restarts;
  unsigned backoff_ms;
  uint64_t started_ms, restart_at_ms;
  bool removed; /* by a reload: not started again */
};

/* gateway.c */
extern struct gw_config cfg; /* the running configuration */
extern const char *cfg_path;
extern uint64_t start_ms; /* when serving began (now_ms) */

/* gateway-supervise.c */
extern pthread_mutex_t lock;
extern struct vol *vols;
extern size_t nvols;
extern bool stopping;      /* SIGTERM or SIGINT: nothing is restarted */
extern bool front_serving; /* the front nbdkit accepts connections */

/* ---- gateway-supervise.c ---- */

/* "hhc-gateway: " and the message, on stderr. */
void msg (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* Monotonic time in ms. */
uint64_t now_ms (void);
/* RUN/NAMESUFFIX (malloc'd; exits when out of memory). */
char *run_path (const char *name, const char *suffix);

/* Lock held below this line, unless said otherwise. */

/* Start every volume of cfg, the map and the front. */
int start_all (void);
void start_volume (struct vol *vl);
/* Rewrite RUN/exports. */
void write_map (void);
/* Child pid exited with status st. */
void reaped (pid_t pid, int st);
/* Start what is due, notice what serves now; the time until the next
 * thing is due, in ms.
 */
int tick (void);
/* SIGTERM to vl. */
void stop_volume (struct vol *vl);
/* Write back every dirty block of vl (lock not held: it takes as long
 * as the backend needs).
 */
void drain_volume (const struct vol *vl);
/* Drain what asks for it, stop every child, wait (lock not held). */
void stop_all (void);

/* ---- gateway-spawn.c ---- */

/* Start volume vo's nbdkit: its pid, 0 if its command line could not
 * be made (a secrets file, said why), -1 if fork failed (said).
 */
pid_t spawn_volume (const struct gw_volume *vo);
/* Start the front nbdkit: its pid, or -1 (said why). */
pid_t spawn_front (void);

/* ---- gateway-reload.c ---- */

/* SIGHUP: read the config again and apply it (lock not held). */
void reload (void);

/* ---- gateway-status.c ---- */

/* The status document (gw_status_fn, HTTP threads; lock not held). */
char *status_json (void *opaque);

/* ---- gateway-notify.c ---- */

/* Main thread; lock not held (they take it to read the volumes).
 * Each does nothing unless NOTIFY_SOCKET is set and libsystemd is
 * built in.
 */

/* Whether to notify; the watchdog interval (sd_watchdog_enabled). */
void notify_init (void);
/* STATUS= when it changed, READY=1 the first time every volume and
 * the front serve, WATCHDOG=1 when due; `wait` shortened to the next
 * ping.
 */
int notify_tick (int wait);
/* WATCHDOG=1 if due (also during long waits, such as drains). */
void notify_watchdog (void);
/* RELOADING=1 with MONOTONIC_USEC: SIGHUP starts a reload. */
void notify_reloading (void);
/* READY=1: the reload is applied (if the first READY=1 went out). */
void notify_reloaded (void);
/* STOPPING=1: the drain and stop begin. */
void notify_stopping (void);

#endif /* HHC_APPLIANCE_GATEWAY_INT_H */
